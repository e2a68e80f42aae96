#include "model/keras_layers.h"

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
#include "model/keras_layer_parsers.h"
#include "model/keras_layer_util.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

struct LayerClass {
  absl::string_view class_name;
  LayerParser parse;
  bool several_inputs = false;  // A merge layer's list of tensors.
};

constexpr LayerClass kLayerClasses[] = {
    {"Conv2D", ParseConv2D},
    {"DepthwiseConv2D", ParseDepthwiseConv2D},
    {"Conv1D", ParseConv1D},
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
    {"Add", ParseAdd, true},
    {"Subtract", ParseSubtract, true},
    {"Multiply", ParseMultiply, true},
    {"Average", ParseAverage, true},
    {"Maximum", ParseMaximum, true},
    {"Minimum", ParseMinimum, true},
    {"Concatenate", ParseConcatenate, true},
    {"BatchNormalization", ParseBatchNormalization},
    {"LayerNormalization", ParseLayerNormalization},
    {"AveragePooling2D", ParseAveragePooling2D},
    {"GlobalAveragePooling1D", ParseGlobalAveragePooling1D},
    {"GlobalAveragePooling2D", ParseGlobalAveragePooling2D},
    {"GlobalMaxPooling1D", ParseGlobalMaxPooling1D},
    {"GlobalMaxPooling2D", ParseGlobalMaxPooling2D},
    {"ZeroPadding2D", ParseZeroPadding2D},
    {"Reshape", ParseReshape},
    {"Permute", ParsePermute},
    {"Rescaling", ParseRescaling},
    {"MultiHeadAttention", ParseMultiHeadAttention, true},
};

constexpr absl::string_view kSupportedLayers =
    "InputLayer, Conv2D, DepthwiseConv2D, Conv1D, MaxPooling2D, Flatten, "
    "Dense, Dropout, Embedding, "
    "Activation, ReLU, LeakyReLU, ELU, Softmax, Add, Subtract, Multiply, "
    "Average, Maximum, Minimum, Concatenate, BatchNormalization, "
    "LayerNormalization, AveragePooling2D, GlobalAveragePooling1D, "
    "GlobalAveragePooling2D, GlobalMaxPooling1D, GlobalMaxPooling2D, "
    "ZeroPadding2D, Reshape, Permute, Rescaling, MultiHeadAttention";

bool HasControlCharacter(absl::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return absl::ascii_iscntrl(c); });
}

}  // namespace

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
