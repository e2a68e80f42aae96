// The core layers: Conv2D, DepthwiseConv2D, Conv1D, MaxPooling2D, Flatten,
// Dense, Dropout, Embedding.
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/keras_layer_parsers.h"
#include "model/keras_layer_util.h"
#include "model/keras_objects.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {

using Json = nlohmann::json;

absl::Status ParseConv2D(const KerasFields& fields, const ParseContext& context,
                         LayerSpec* layer,
                         std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kConv2D;
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t filters,
                           fields.Int("filters", 1, kMaxDim, std::nullopt));
  layer->filters = static_cast<int>(filters);
  ConvWindow w;
  PSTRAIN_ASSIGN_OR_RETURN(w.kernel,
                           fields.IntPair("kernel_size", std::nullopt));
  PSTRAIN_ASSIGN_OR_RETURN(w.strides, fields.IntPair("strides", Window{1, 1}));
  PSTRAIN_ASSIGN_OR_RETURN(w.dilation,
                           fields.IntPair("dilation_rate", Window{1, 1}));
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t groups,
                           fields.Int("groups", 1, kMaxDim, 1));
  if (groups != 1) {
    return fields.Unsupported("groups", Json(groups), "expected 1");
  }
  PSTRAIN_RETURN_IF_ERROR(
      ParseConvWindow(fields, w, /*one_d=*/false, filters, layer));
  const int64_t in_channels = layer->input_shape[2];
  return ParseKernelAndBias(
      fields, {w.kernel.first, w.kernel.second, in_channels, filters}, filters,
      context, layer, variables);
}

// A grouped convolution of one input channel per group: its kernel
// [kh, kw, channels, multiplier] is, element for element, the HWIO kernel
// [kh, kw, 1, channels * multiplier] of `channels` groups, output channel
// c * multiplier + m from input channel c.
absl::Status ParseDepthwiseConv2D(const KerasFields& fields,
                                  const ParseContext& context, LayerSpec* layer,
                                  std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kConv2D;
  layer->depthwise = true;
  PSTRAIN_ASSIGN_OR_RETURN(
      const int64_t multiplier,
      fields.Int("depth_multiplier", 1, kMaxDim, int64_t{1}));
  ConvWindow w;
  PSTRAIN_ASSIGN_OR_RETURN(w.kernel,
                           fields.IntPair("kernel_size", std::nullopt));
  PSTRAIN_ASSIGN_OR_RETURN(w.strides, fields.IntPair("strides", Window{1, 1}));
  PSTRAIN_ASSIGN_OR_RETURN(w.dilation,
                           fields.IntPair("dilation_rate", Window{1, 1}));
  if (layer->input_shape.size() == 3 &&
      layer->input_shape[2] * multiplier > kMaxDim) {
    return fields.FieldError(
        "depth_multiplier",
        absl::StrCat(multiplier, " times the input's ", layer->input_shape[2],
                     " channels is too many"));
  }
  const int64_t in_channels =
      layer->input_shape.size() == 3 ? layer->input_shape[2] : 1;
  const int64_t out_channels = in_channels * multiplier;
  PSTRAIN_RETURN_IF_ERROR(
      ParseConvWindow(fields, w, /*one_d=*/false, out_channels, layer));
  layer->filters = static_cast<int>(out_channels);
  layer->groups = static_cast<int>(in_channels);
  return ParseKernelAndBias(
      fields, {w.kernel.first, w.kernel.second, in_channels, multiplier},
      out_channels, context, layer, variables, "depthwise", "depthwise_kernel");
}

// A Conv2D of height 1 over [1, steps, channels]: its kernel [k, in,
// filters] is the HWIO kernel [1, k, in, filters].
absl::Status ParseConv1D(const KerasFields& fields, const ParseContext& context,
                         LayerSpec* layer,
                         std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kConv2D;
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t filters,
                           fields.Int("filters", 1, kMaxDim, std::nullopt));
  layer->filters = static_cast<int>(filters);
  ConvWindow w;
  PSTRAIN_ASSIGN_OR_RETURN(const int kernel,
                           ParseOneInt(fields, "kernel_size", std::nullopt));
  PSTRAIN_ASSIGN_OR_RETURN(const int strides,
                           ParseOneInt(fields, "strides", 1));
  PSTRAIN_ASSIGN_OR_RETURN(const int dilation,
                           ParseOneInt(fields, "dilation_rate", 1));
  w.kernel = {1, kernel};
  w.strides = {1, strides};
  w.dilation = {1, dilation};
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t groups,
                           fields.Int("groups", 1, kMaxDim, 1));
  if (groups != 1) {
    return fields.Unsupported("groups", Json(groups), "expected 1");
  }
  PSTRAIN_RETURN_IF_ERROR(
      ParseConvWindow(fields, w, /*one_d=*/true, filters, layer));
  const int64_t in_channels = layer->input_shape[1];
  return ParseKernelAndBias(fields, {kernel, in_channels, filters}, filters,
                            context, layer, variables);
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
  // 0: a table that grows on first touch, keyed by 64-bit id
  // (model/dynamic_embeddings.h).
  PSTRAIN_ASSIGN_OR_RETURN(layer->input_dim,
                           fields.Int("input_dim", 0, kMaxDim, std::nullopt));
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
  // Keras's penalty is over the whole table; pstrain's tables live on the
  // ps (and may grow), and a worker holds only the rows its batch reads.
  if (const Json* regularizer = fields.Find("embeddings_regularizer")) {
    return fields.Unsupported(
        "embeddings_regularizer", *regularizer,
        "expected null: the table lives on the ps tasks and no worker holds "
        "all of it, so Keras's penalty over the whole table cannot be "
        "computed");
  }
  for (const char* key : {"activity_regularizer", "embeddings_constraint",
                          "quantization_config", "lora_rank"}) {
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
}  // namespace worker
}  // namespace pstrain
