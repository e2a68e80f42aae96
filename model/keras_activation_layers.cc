// The activation layers: Activation, ReLU, LeakyReLU, ELU, Softmax.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/keras_layer_parsers.h"
#include "model/keras_layer_util.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {

using Json = nlohmann::json;

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
}  // namespace worker
}  // namespace pstrain
