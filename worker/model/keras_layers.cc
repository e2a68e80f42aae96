#include "worker/model/keras_layers.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/derived_seed.h"
#include "common/json_util.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"
#include "worker/model/keras_objects.h"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;
using Window = std::pair<int, int>;

// Most floats in all the variables together: as in one tensor (2^62 bytes).
constexpr int64_t kMaxTotalElements = (int64_t{1} << 62) / sizeof(float);

// ---------------------------------------------------------------------------
// Options shared by several layers.

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
                                std::vector<VariableDef>* variables) {
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
      ParseInitializer(fields, "kernel_initializer", glorot));
  PSTRAIN_ASSIGN_OR_RETURN(Initializer bias_init,
                           ParseInitializer(fields, "bias_initializer", zeros));
  PSTRAIN_ASSIGN_OR_RETURN(layer->l2, ParseL2(fields, "kernel_regularizer"));
  // Keras 3's quantization and LoRA would change what is computed.
  for (const char* key :
       {"bias_regularizer", "activity_regularizer", "kernel_constraint",
        "bias_constraint", "quantization_config", "lora_rank"}) {
    PSTRAIN_RETURN_IF_ERROR(fields.ExpectNull(key));
  }
  PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, "kernel", kernel_shape,
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

// Conv2D's and MaxPooling2D's strides and padding for a `window` read from
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

// ---------------------------------------------------------------------------
// The layers. Each reads its config from `fields`, fills `layer` (whose name
// and input_shape are set) and appends its variables.

absl::Status ParseConv2D(const KerasFields& fields, const ParseContext& context,
                         LayerSpec* layer,
                         std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kConv2D;
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t filters,
                           fields.Int("filters", 1, kMaxDim, std::nullopt));
  layer->filters = static_cast<int>(filters);
  PSTRAIN_ASSIGN_OR_RETURN(const Window kernel,
                           fields.IntPair("kernel_size", std::nullopt));
  PSTRAIN_RETURN_IF_ERROR(
      ParseWindow(fields, "kernel_size", kernel, {1, 1}, layer));
  PSTRAIN_ASSIGN_OR_RETURN(const Window dilation,
                           fields.IntPair("dilation_rate", Window{1, 1}));
  if (dilation != Window{1, 1}) {
    return fields.Unsupported("dilation_rate", *fields.Find("dilation_rate"),
                              "expected 1 or [1, 1]");
  }
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t groups,
                           fields.Int("groups", 1, kMaxDim, 1));
  if (groups != 1) {
    return fields.Unsupported("groups", Json(groups), "expected 1");
  }
  const int64_t in_channels = layer->input_shape[2];
  layer->output_shape[2] = filters;
  return ParseKernelAndBias(fields,
                            {kernel.first, kernel.second, in_channels, filters},
                            filters, context, layer, variables);
}

absl::Status ParseMaxPooling2D(const KerasFields& fields, const ParseContext&,
                               LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kMaxPool2D;
  PSTRAIN_ASSIGN_OR_RETURN(const Window pool,
                           fields.IntPair("pool_size", Window{2, 2}));
  // Keras: strides null means the pool size.
  return ParseWindow(fields, "pool_size", pool, pool, layer);
}

absl::Status ParseFlatten(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kFlatten;
  PSTRAIN_RETURN_IF_ERROR(ExpectChannelsLast(fields));
  absl::StatusOr<int64_t> size = NumElements(layer->input_shape, sizeof(float));
  if (!size.ok()) {
    return fields.Error(absl::StrCat("input ", ShapeString(layer->input_shape),
                                     " is too large to flatten"));
  }
  layer->output_shape = {*size};
  return absl::OkStatus();
}

absl::Status ParseDense(const KerasFields& fields, const ParseContext& context,
                        LayerSpec* layer, std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kDense;
  PSTRAIN_ASSIGN_OR_RETURN(layer->units,
                           fields.Int("units", 1, kMaxDim, std::nullopt));
  // On the last axis of any rank, as Keras's Dense.
  layer->output_shape = layer->input_shape;
  layer->output_shape.back() = layer->units;
  if (!NumElements(layer->output_shape, sizeof(float)).ok()) {
    return fields.Error(absl::StrCat(
        "output ", ShapeString(layer->output_shape), " is too large"));
  }
  return ParseKernelAndBias(fields, {layer->input_shape.back(), layer->units},
                            layer->units, context, layer, variables);
}

absl::Status ParseDropout(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kDropout;
  PSTRAIN_ASSIGN_OR_RETURN(const double rate,
                           fields.Number("rate", std::nullopt));
  if (!(rate >= 0 && rate < 1)) {
    return fields.FieldError("rate",
                             absl::StrCat(rate, " is out of range [0, 1)"));
  }
  layer->rate = static_cast<float>(rate);
  PSTRAIN_RETURN_IF_ERROR(fields.ExpectNull("noise_shape"));
  layer->output_shape = layer->input_shape;
  return absl::OkStatus();
}

absl::Status ParseEmbedding(const KerasFields& fields,
                            const ParseContext& context, LayerSpec* layer,
                            std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kEmbedding;
  PSTRAIN_RETURN_IF_ERROR(ExpectRank(fields, *layer, 1, "[sequence length]"));
  PSTRAIN_ASSIGN_OR_RETURN(layer->input_dim,
                           fields.Int("input_dim", 1, kMaxDim, std::nullopt));
  PSTRAIN_ASSIGN_OR_RETURN(layer->output_dim,
                           fields.Int("output_dim", 1, kMaxDim, std::nullopt));
  // tf.keras 2.x's input_length, when given, is the sequence length.
  const int64_t length = layer->input_shape[0];
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t input_length,
                           fields.Int("input_length", 1, kMaxDim, length));
  if (input_length != length) {
    return fields.FieldError(
        "input_length", absl::StrCat(input_length, " does not match the input ",
                                     ShapeString(layer->input_shape)));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const bool mask_zero,
                           fields.Bool("mask_zero", false));
  if (mask_zero) {
    return fields.Unsupported("mask_zero", Json(true), "expected false");
  }
  for (const char* key :
       {"embeddings_regularizer", "activity_regularizer",
        "embeddings_constraint", "quantization_config", "lora_rank"}) {
    PSTRAIN_RETURN_IF_ERROR(fields.ExpectNull(key));
  }
  Initializer uniform;
  uniform.mutable_random_uniform()->set_minval(-0.05f);
  uniform.mutable_random_uniform()->set_maxval(0.05f);
  PSTRAIN_ASSIGN_OR_RETURN(
      Initializer init,
      ParseInitializer(fields, "embeddings_initializer", uniform));
  layer->output_shape = {length, layer->output_dim};
  return AddVariable(fields, "embeddings",
                     {layer->input_dim, layer->output_dim}, std::move(init),
                     /*sparse=*/true, context.seed, layer, variables);
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

absl::Status ParseReLU(const KerasFields& fields, const ParseContext&,
                       LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kActivation;
  layer->output_shape = layer->input_shape;
  ActivationParams& params = layer->activation_params;
  if (const Json* max = fields.Find("max_value");
      max != nullptr && max->is_number() && max->get<double>() == 0) {
    return fields.Unsupported("max_value", *max, "expected null or > 0");
  }
  PSTRAIN_ASSIGN_OR_RETURN(params.max_value,
                           NonNegative(fields, "max_value", 0));
  PSTRAIN_ASSIGN_OR_RETURN(params.negative_slope,
                           NonNegative(fields, "negative_slope", 0));
  PSTRAIN_ASSIGN_OR_RETURN(params.threshold,
                           NonNegative(fields, "threshold", 0));
  const bool plain = params.max_value == 0 && params.negative_slope == 0 &&
                     params.threshold == 0;
  layer->activation = plain ? Activation::kRelu : Activation::kKerasRelu;
  return absl::OkStatus();
}

absl::Status ParseLeakyReLU(const KerasFields& fields, const ParseContext&,
                            LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kActivation;
  layer->activation = Activation::kKerasRelu;
  layer->output_shape = layer->input_shape;
  // Keras 3 names the slope negative_slope, tf.keras 2.x alpha.
  const char* key = fields.Find("negative_slope") == nullptr &&
                            fields.Find("alpha") != nullptr
                        ? "alpha"
                        : "negative_slope";
  PSTRAIN_ASSIGN_OR_RETURN(layer->activation_params.negative_slope,
                           NonNegative(fields, key, 0.3));
  return absl::OkStatus();
}

absl::Status ParseELU(const KerasFields& fields, const ParseContext&,
                      LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kActivation;
  layer->activation = Activation::kElu;
  layer->output_shape = layer->input_shape;
  PSTRAIN_ASSIGN_OR_RETURN(const double alpha, fields.Number("alpha", 1.0));
  layer->activation_params.alpha = static_cast<float>(alpha);
  return absl::OkStatus();
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

absl::Status ParseSoftmax(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kActivation;
  layer->activation = Activation::kSoftmax;
  layer->output_shape = layer->input_shape;
  PSTRAIN_ASSIGN_OR_RETURN(layer->activation_params.axis,
                           ParseAxis(fields, layer->input_shape.size(), -1));
  return absl::OkStatus();
}

absl::Status ParseActivationLayer(const KerasFields& fields,
                                  const ParseContext& context, LayerSpec* layer,
                                  std::vector<VariableDef>*) {
  layer->kind = LayerKind::kActivation;
  layer->output_shape = layer->input_shape;
  return ParseActivation(fields, "activation", std::nullopt, context,
                         layer->output_shape.size(), layer);
}

// Merge layers: every input of one shape (Keras's broadcasting is not
// supported), at least two (Subtract: exactly two).
absl::Status ParseMerge(const KerasFields& fields, MergeOp op,
                        LayerSpec* layer) {
  layer->kind = LayerKind::kMerge;
  layer->merge = op;
  const size_t n = layer->input_shapes.size();
  if (n < 2 || (op == MergeOp::kSubtract && n != 2)) {
    return fields.Error(
        absl::StrCat("reads ", n, " tensor(s); it needs ",
                     op == MergeOp::kSubtract ? "exactly 2" : "at least 2"));
  }
  for (size_t i = 1; i < n; ++i) {
    if (layer->input_shapes[i] != layer->input_shapes[0]) {
      return fields.Error(absl::StrCat(
          "input ", i, " has shape ", ShapeString(layer->input_shapes[i]),
          ", input 0 ", ShapeString(layer->input_shapes[0]),
          ": merged inputs must have one shape"));
    }
  }
  layer->output_shape = layer->input_shape;
  return absl::OkStatus();
}

template <MergeOp op>
absl::Status ParseMergeLayer(const KerasFields& fields, const ParseContext&,
                             LayerSpec* layer, std::vector<VariableDef>*) {
  return ParseMerge(fields, op, layer);
}

absl::Status ParseConcatenate(const KerasFields& fields, const ParseContext&,
                              LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kConcatenate;
  const std::vector<std::vector<int64_t>>& shapes = layer->input_shapes;
  if (shapes.size() < 2) {
    return fields.Error(absl::StrCat("reads ", shapes.size(),
                                     " tensor(s); it needs at least 2"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(layer->axis,
                           ParseAxis(fields, shapes[0].size(), -1));
  layer->output_shape = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    bool match = shapes[i].size() == shapes[0].size();
    for (size_t d = 0; match && d < shapes[0].size(); ++d) {
      match =
          static_cast<int>(d) == layer->axis || shapes[i][d] == shapes[0][d];
    }
    if (!match) {
      return fields.Error(
          absl::StrCat("input ", i, " has shape ", ShapeString(shapes[i]),
                       ", input 0 ", ShapeString(shapes[0]),
                       ": they must agree but on axis ", layer->axis + 1));
    }
    layer->output_shape[layer->axis] += shapes[i][layer->axis];
  }
  return absl::OkStatus();
}

// Reads a layer's config from `fields`, fills `layer` (whose name and
// input shapes are set) and appends its variables.
using LayerParser = absl::Status (*)(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);

struct LayerClass {
  absl::string_view class_name;
  LayerParser parse;
  bool several_inputs = false;  // A merge layer's list of tensors.
};

constexpr LayerClass kLayerClasses[] = {
    {"Conv2D", ParseConv2D},
    {"MaxPooling2D", ParseMaxPooling2D},
    {"Flatten", ParseFlatten},
    {"Dense", ParseDense},
    {"Dropout", ParseDropout},
    {"Embedding", ParseEmbedding},
    {"Activation", ParseActivationLayer},
    {"ReLU", ParseReLU},
    {"LeakyReLU", ParseLeakyReLU},
    {"ELU", ParseELU},
    {"Softmax", ParseSoftmax},
    {"Add", ParseMergeLayer<MergeOp::kAdd>, true},
    {"Subtract", ParseMergeLayer<MergeOp::kSubtract>, true},
    {"Multiply", ParseMergeLayer<MergeOp::kMultiply>, true},
    {"Average", ParseMergeLayer<MergeOp::kAverage>, true},
    {"Maximum", ParseMergeLayer<MergeOp::kMaximum>, true},
    {"Minimum", ParseMergeLayer<MergeOp::kMinimum>, true},
    {"Concatenate", ParseConcatenate, true},
};

constexpr absl::string_view kSupportedLayers =
    "InputLayer, Conv2D, MaxPooling2D, Flatten, Dense, Dropout, Embedding, "
    "Activation, ReLU, LeakyReLU, ELU, Softmax, Add, Subtract, Multiply, "
    "Average, Maximum, Minimum, Concatenate";

bool HasControlCharacter(absl::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return absl::ascii_iscntrl(c); });
}

}  // namespace

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

absl::StatusOr<LayerEntry> ReadLayerEntry(const Json& entry,
                                          absl::string_view prefix, int index) {
  const std::string at = absl::StrCat(prefix, "layer ", index);
  if (!entry.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": expected an object, ", JsonGot(entry)));
  }
  const KerasFields entry_fields(entry, absl::StrCat(at, ": "));
  LayerEntry layer;
  layer.json = &entry;
  PSTRAIN_ASSIGN_OR_RETURN(layer.class_name,
                           entry_fields.String("class_name", std::nullopt));
  if (HasControlCharacter(layer.class_name)) {
    return entry_fields.FieldError("class_name",
                                   "contains a control character");
  }
  layer.config = entry_fields.Find("config");
  if (layer.config == nullptr) {
    return entry_fields.FieldError("config", "missing");
  }
  if (!layer.config->is_object()) {
    return entry_fields.FieldError(
        "config", absl::StrCat("expected an object, ", JsonGot(*layer.config)));
  }
  const KerasFields unnamed(*layer.config,
                            absl::StrCat(at, " (", layer.class_name, "): "));
  PSTRAIN_ASSIGN_OR_RETURN(layer.name, unnamed.String("name", std::nullopt));
  if (HasControlCharacter(layer.name)) {
    return unnamed.FieldError("name", "contains a control character");
  }
  layer.where =
      absl::StrCat(at, " '", layer.name, "' (", layer.class_name, "): ");
  PSTRAIN_RETURN_IF_ERROR(
      KerasFields(entry, layer.where).ExpectKerasClass(layer.class_name));
  const KerasFields fields = layer.Fields();
  if (layer.name.empty()) return fields.FieldError("name", "is empty");
  if (layer.name.find('/') != std::string::npos) {
    return fields.FieldError(
        "name",
        "contains '/', which separates variable paths (\"dense/kernel\")");
  }
  return layer;
}

absl::Status ParseLayer(const LayerEntry& entry, const ParseContext& context,
                        LayerSpec* layer, std::vector<VariableDef>* variables) {
  const LayerClass* found = nullptr;
  for (const LayerClass& layer_class : kLayerClasses) {
    if (layer_class.class_name == entry.class_name) found = &layer_class;
  }
  const KerasFields fields = entry.Fields();
  if (found == nullptr) {
    return fields.Error(
        absl::StrCat(entry.class_name,
                     " is not supported (supported: ", kSupportedLayers, ")"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const bool trainable,
                           fields.Bool("trainable", true));
  if (!trainable) {
    return fields.Unsupported("trainable", Json(false),
                              "expected true: pstrain trains every layer");
  }
  PSTRAIN_RETURN_IF_ERROR(ExpectFloat32(fields));
  if (!found->several_inputs && layer->input_shapes.size() != 1) {
    return fields.Error(absl::StrCat("reads ", layer->input_shapes.size(),
                                     " tensors; ", entry.class_name,
                                     " reads one"));
  }
  return found->parse(fields, context, layer, variables);
}

absl::StatusOr<std::vector<int64_t>> ParseInputLayerShape(
    const KerasFields& fields) {
  // Keras 3 writes batch_shape, tf.keras 2.x batch_input_shape.
  const bool keras2 = fields.Find("batch_shape") == nullptr &&
                      fields.Find("batch_input_shape") != nullptr;
  return ParseBatchShape(fields, keras2 ? "batch_input_shape" : "batch_shape");
}

}  // namespace worker
}  // namespace pstrain
