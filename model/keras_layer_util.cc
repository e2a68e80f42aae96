#include "model/keras_layer_util.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/derived_seed.h"
#include "common/json_util.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/keras_objects.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

// Most floats in all the variables together: as in one tensor (2^62 bytes).
constexpr int64_t kMaxTotalElements = (int64_t{1} << 62) / sizeof(float);

// Keras's activation names and what pstrain computes for each.
struct NamedActivation {
  absl::string_view name;
  Activation activation;
};

constexpr NamedActivation kActivations[] = {
    {"linear", Activation::kLinear},
    {"relu", Activation::kRelu},
    {"relu6", Activation::kKerasRelu},
    {"leaky_relu", Activation::kKerasRelu},
    {"softmax", Activation::kSoftmax},
    {"log_softmax", Activation::kLogSoftmax},
    {"gelu", Activation::kGelu},
    {"gelu_new", Activation::kGeluTanh},  // TensorFlow.js's approximation.
    {"sigmoid", Activation::kSigmoid},
    {"hard_sigmoid", Activation::kHardSigmoid},
    {"tanh", Activation::kTanh},
    {"silu", Activation::kSilu},
    {"swish", Activation::kSilu},
    {"elu", Activation::kElu},
    {"selu", Activation::kSelu},
    {"softplus", Activation::kSoftplus},
};

// The activation named in field `key` (`fallback` when absent or null) of
// a layer whose output has `rank` dimensions per example: sets the layer's
// activation and its parameters.
}  // namespace

absl::Status ParseActivation(const KerasFields& fields, absl::string_view key,
                             std::optional<std::string> fallback,
                             const ParseContext& context, size_t rank,
                             LayerSpec* layer) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string name,
                           fields.String(key, std::move(fallback)));
  const NamedActivation* found = nullptr;
  for (const NamedActivation& named : kActivations) {
    if (named.name == name) found = &named;
  }
  if (found == nullptr) {
    std::vector<absl::string_view> names;
    for (const NamedActivation& named : kActivations) {
      names.push_back(named.name);
    }
    return fields.Unsupported(
        key, Json(name),
        absl::StrCat("supported: ", absl::StrJoin(names, ", ")));
  }
  layer->activation = found->activation;
  ActivationParams& params = layer->activation_params;
  params = ActivationParams();
  params.axis = static_cast<int>(rank) - 1;
  if (name == "relu6") params.max_value = 6;
  // Keras's leaky_relu function (the LeakyReLU layer's default is 0.3).
  if (name == "leaky_relu") params.negative_slope = 0.2f;
  // tf.keras 2.x: clip(0.2 x + 0.5, 0, 1); Keras 3: clip(x / 6 + 0.5, 0, 1).
  if (name == "hard_sigmoid") params.alpha = context.keras2 ? 0.2f : 1 / 6.0f;
  return absl::OkStatus();
}

// "data_format" must mean channels_last (null is Keras's default, which is
// channels_last unless keras.json says otherwise).
absl::Status ExpectChannelsLast(const KerasFields& fields) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string format,
                           fields.String("data_format", "channels_last"));
  if (format == "channels_last") return absl::OkStatus();
  return fields.Unsupported("data_format", Json(format),
                            "expected \"channels_last\"");
}

// Appends the variable `<layer>/<suffix>` of `shape` to `variables`, its
// initializer seeded from the run seed and its name.
absl::Status AddVariable(const KerasFields& fields, absl::string_view suffix,
                         const std::vector<int64_t>& shape, Initializer init,
                         bool sparse, uint64_t seed, LayerSpec* layer,
                         std::vector<VariableDef>* variables) {
  const std::string name = absl::StrCat(layer->name, "/", suffix);
  const absl::StatusOr<int64_t> elements = NumElements(shape, sizeof(float));
  if (!elements.ok()) {
    return fields.Error(absl::StrCat("variable ", name, " of shape ",
                                     ShapeString(shape), " is too large"));
  }
  // Together too, so that ParameterCount cannot overflow: each variable is
  // below the limit, so the running total stays below twice the limit.
  int64_t total = *elements;
  for (const VariableDef& v : *variables) {
    int64_t n = 1;
    for (const int64_t dim : v.shape().dims()) n *= dim;
    total += n;
    if (total > kMaxTotalElements) {
      return fields.Error(absl::StrCat(
          "variable ", name, " makes the model's variables too large (over ",
          kMaxTotalElements, " floats together)"));
    }
  }
  VariableDef def;
  def.set_name(name);
  def.set_dtype(DT_FLOAT);
  for (const int64_t dim : shape) def.mutable_shape()->add_dims(dim);
  init.set_seed(DeriveSeed(seed, name));
  *def.mutable_initializer() = std::move(init);
  def.set_sparse(sparse);
  layer->variables.push_back(name);
  variables->push_back(std::move(def));
  return absl::OkStatus();
}

// Conv2D's and Dense's activation, kernel and bias: kernel of
// `kernel_shape`, bias of `units`.
absl::Status ParseKernelAndBias(const KerasFields& fields,
                                const std::vector<int64_t>& kernel_shape,
                                int64_t units, const ParseContext& context,
                                LayerSpec* layer,
                                std::vector<VariableDef>* variables,
                                absl::string_view kernel_key,
                                absl::string_view kernel_variable) {
  PSTRAIN_RETURN_IF_ERROR(ParseActivation(fields, "activation", "linear",
                                          context, layer->output_shape.size(),
                                          layer));
  PSTRAIN_ASSIGN_OR_RETURN(layer->use_bias, fields.Bool("use_bias", true));
  Initializer glorot;
  glorot.mutable_glorot_uniform();
  Initializer zeros;
  zeros.mutable_zeros();
  PSTRAIN_ASSIGN_OR_RETURN(
      Initializer kernel_init,
      ParseInitializer(fields, absl::StrCat(kernel_key, "_initializer"),
                       glorot));
  PSTRAIN_ASSIGN_OR_RETURN(Initializer bias_init,
                           ParseInitializer(fields, "bias_initializer", zeros));
  PSTRAIN_ASSIGN_OR_RETURN(
      layer->kernel_regularizer,
      ParseRegularizer(fields, absl::StrCat(kernel_key, "_regularizer")));
  PSTRAIN_ASSIGN_OR_RETURN(layer->bias_regularizer,
                           ParseRegularizer(fields, "bias_regularizer"));
  // Keras 3's quantization and LoRA would change what is computed.
  for (const std::string& key :
       {std::string("activity_regularizer"),
        absl::StrCat(kernel_key, "_constraint"), std::string("bias_constraint"),
        std::string("quantization_config"), std::string("lora_rank")}) {
    PSTRAIN_RETURN_IF_ERROR(fields.ExpectNull(key));
  }
  PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, kernel_variable, kernel_shape,
                                      std::move(kernel_init), false,
                                      context.seed, layer, variables));
  if (!layer->use_bias) return absl::OkStatus();
  return AddVariable(fields, "bias", {units}, std::move(bias_init), false,
                     context.seed, layer, variables);
}

absl::Status ExpectRank(const KerasFields& fields, const LayerSpec& layer,
                        size_t rank, absl::string_view meaning) {
  if (layer.input_shape.size() == rank) return absl::OkStatus();
  return fields.Error(absl::StrCat("expects an input of rank ", rank, " ",
                                   meaning, ", got ",
                                   ShapeString(layer.input_shape)));
}

// The pooling layers' strides and padding for a `window` read from
// field `window_key`; sets the layer's window fields and output_shape (with
// the input's channels).
absl::Status ParseWindow(const KerasFields& fields,
                         absl::string_view window_key, Window window,
                         Window default_strides, LayerSpec* layer) {
  PSTRAIN_RETURN_IF_ERROR(
      ExpectRank(fields, *layer, 3, "[height, width, channels]"));
  PSTRAIN_RETURN_IF_ERROR(ExpectChannelsLast(fields));
  PSTRAIN_ASSIGN_OR_RETURN(const Window strides,
                           fields.IntPair("strides", default_strides));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string padding,
                           fields.String("padding", "valid"));
  if (padding != "valid" && padding != "same") {
    return fields.Unsupported("padding", Json(padding),
                              "expected \"valid\" or \"same\"");
  }
  layer->kernel_h = window.first;
  layer->kernel_w = window.second;
  layer->stride_h = strides.first;
  layer->stride_w = strides.second;
  layer->same_padding = padding == "same";
  const int64_t in_h = layer->input_shape[0];
  const int64_t in_w = layer->input_shape[1];
  if (!layer->same_padding && (in_h < window.first || in_w < window.second)) {
    return fields.Error(absl::StrCat(window_key, " [", window.first, ", ",
                                     window.second, "] does not fit the input ",
                                     ShapeString(layer->input_shape),
                                     " with padding \"valid\""));
  }
  const auto length = [&](int64_t in, int k, int s) {
    return layer->same_padding ? (in + s - 1) / s : (in - k) / s + 1;
  };
  layer->output_shape = {length(in_h, window.first, strides.first),
                         length(in_w, window.second, strides.second),
                         layer->input_shape[2]};
  return absl::OkStatus();
}

absl::Status ParseConvWindow(const KerasFields& fields, const ConvWindow& w,
                             bool one_d, int64_t out_channels,
                             LayerSpec* layer) {
  PSTRAIN_RETURN_IF_ERROR(
      one_d ? ExpectRank(fields, *layer, 2, "[steps, channels]")
            : ExpectRank(fields, *layer, 3, "[height, width, channels]"));
  PSTRAIN_RETURN_IF_ERROR(ExpectChannelsLast(fields));
  // As Keras writes them: Conv1D's as one integer.
  const auto describe = [one_d](Window pair) {
    return one_d ? absl::StrCat(pair.second)
                 : absl::StrCat("[", pair.first, ", ", pair.second, "]");
  };
  if (std::max(w.strides.first, w.strides.second) > 1 &&
      std::max(w.dilation.first, w.dilation.second) > 1) {
    return fields.Error(absl::StrCat(
        "strides ", describe(w.strides), " with dilation_rate ",
        describe(w.dilation),
        " is not supported (Keras refuses strides > 1 together with "
        "dilation_rate > 1)"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string padding,
                           fields.String("padding", "valid"));
  if (padding != "valid" && padding != "same" &&
      !(one_d && padding == "causal")) {
    return fields.Unsupported("padding", Json(padding),
                              one_d
                                  ? "expected \"valid\", \"same\" or \"causal\""
                                  : "expected \"valid\" or \"same\"");
  }
  layer->kernel_h = w.kernel.first;
  layer->kernel_w = w.kernel.second;
  layer->stride_h = w.strides.first;
  layer->stride_w = w.strides.second;
  layer->dilation_h = w.dilation.first;
  layer->dilation_w = w.dilation.second;
  layer->same_padding = padding == "same";
  layer->causal_padding = padding == "causal";
  const int64_t in_h = one_d ? 1 : layer->input_shape[0];
  const int64_t in_w = layer->input_shape[one_d ? 0 : 1];
  const int64_t extent_h = (int64_t{w.kernel.first} - 1) * w.dilation.first + 1;
  const int64_t extent_w =
      (int64_t{w.kernel.second} - 1) * w.dilation.second + 1;
  if (padding == "valid" && (in_h < extent_h || in_w < extent_w)) {
    const bool dilated = w.dilation != Window{1, 1};
    return fields.Error(absl::StrCat(
        "kernel_size ", describe(w.kernel),
        dilated ? absl::StrCat(" with dilation_rate ", describe(w.dilation))
                : "",
        " does not fit the input ", ShapeString(layer->input_shape),
        " with padding \"valid\""));
  }
  const auto length = [&](int64_t in, int64_t extent, int64_t s) {
    return padding == "valid" ? (in - extent) / s + 1 : (in + s - 1) / s;
  };
  const int64_t out_w = length(in_w, extent_w, w.strides.second);
  if (one_d) {
    layer->output_shape = {out_w, out_channels};
  } else {
    layer->output_shape = {length(in_h, extent_h, w.strides.first), out_w,
                           out_channels};
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParseOneInt(const KerasFields& fields,
                                absl::string_view key,
                                std::optional<int> fallback) {
  const Json* value = fields.Find(key);
  if (value != nullptr && value->is_array() && value->size() == 1) {
    const Json& first = (*value)[0];
    if (!IsIntegerIn(first, 1, std::numeric_limits<int>::max())) {
      return fields.FieldError(
          key, absl::StrCat("expected an integer in [1, ",
                            std::numeric_limits<int>::max(), "], got ",
                            DescribeJson(*value)));
    }
    return first.get<int>();
  }
  if (value != nullptr && !value->is_number_integer()) {
    return fields.FieldError(
        key, absl::StrCat("expected an integer or a list of 1 integer, ",
                          JsonGot(*value)));
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      const int64_t n,
      fields.Int(key, 1, std::numeric_limits<int>::max(),
                 fallback.has_value() ? std::optional<int64_t>(*fallback)
                                      : std::nullopt));
  return static_cast<int>(n);
}

// A number field in [min, +inf); `fallback` when absent or null.
absl::StatusOr<float> NonNegative(const KerasFields& fields,
                                  absl::string_view key, double fallback) {
  PSTRAIN_ASSIGN_OR_RETURN(const double value, fields.Number(key, fallback));
  if (value < 0) {
    return fields.FieldError(key, absl::StrCat(value, " is negative"));
  }
  return static_cast<float>(value);
}

// An axis of a per-example shape of `rank` from Keras's axis, which counts
// the batch: -1 the last, 1 the first after the batch.
absl::StatusOr<int> ParseAxis(const KerasFields& fields, size_t rank,
                              int64_t fallback) {
  const int64_t max = static_cast<int64_t>(rank);
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t axis,
                           fields.Int("axis", -max, max, fallback));
  if (axis == 0) {
    return fields.Unsupported("axis", Json(0),
                              "the batch axis; expected another");
  }
  return static_cast<int>(axis > 0 ? axis - 1 : max + axis);
}

// Refuses every dtype but float32, as a string or a Keras dtype policy.
absl::Status ExpectFloat32(const KerasFields& fields) {
  const Json* dtype = fields.Find("dtype");
  if (dtype == nullptr) return absl::OkStatus();
  std::string name;
  if (dtype->is_string()) {
    name = dtype->get<std::string>();
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(KerasObject policy, fields.Object("dtype"));
    if (policy.class_name != "DTypePolicy" && policy.class_name != "Policy" &&
        policy.class_name != "FloatDTypePolicy") {
      return fields.Unsupported("dtype", *dtype, "expected \"float32\"");
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        name,
        fields.Nested(*policy.config, "dtype").String("name", std::nullopt));
  }
  if (name == "float32") return absl::OkStatus();
  return fields.Unsupported("dtype", Json(name), "expected \"float32\"");
}

// The per-example shape of the batch shape [batch, d1, d2, ...] in `key`;
// the batch dimension may be anything, the others must be known.
absl::StatusOr<std::vector<int64_t>> ParseBatchShape(const KerasFields& fields,
                                                     absl::string_view key) {
  const Json* value = fields.Find(key);
  if (value == nullptr) return fields.FieldError(key, "missing");
  if (!value->is_array()) {
    return fields.FieldError(
        key,
        absl::StrCat("expected a list [batch, dim, ...], ", JsonGot(*value)));
  }
  if (value->size() < 2) {
    return fields.FieldError(
        key, absl::StrCat("expected a batch dimension and at least one more, "
                          "got ",
                          DescribeJson(*value)));
  }
  const Json& batch = (*value)[0];
  if (!batch.is_null() && !batch.is_number_integer()) {
    return fields.FieldError(
        absl::StrCat(key, "[0]"),
        absl::StrCat("expected null or an integer, ", JsonGot(batch)));
  }
  std::vector<int64_t> shape;
  for (size_t i = 1; i < value->size(); ++i) {
    const std::string dim_key = absl::StrCat(key, "[", i, "]");
    const Json& dim = (*value)[i];
    if (dim.is_null()) {
      return fields.FieldError(
          dim_key, "is null: every dimension but the batch must be known");
    }
    if (!IsIntegerIn(dim, 1, kMaxDim)) {
      return fields.FieldError(
          dim_key, absl::StrCat("expected an integer in [1, ", kMaxDim,
                                "], got ", DescribeJson(dim)));
    }
    shape.push_back(dim.get<int64_t>());
  }
  return shape;
}

}  // namespace worker
}  // namespace pstrain
