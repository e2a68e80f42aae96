// The normalization layers: BatchNormalization, LayerNormalization.
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/keras_layer_parsers.h"
#include "model/keras_layer_util.h"
#include "model/keras_objects.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

// The fields both layers share: axis (the last one only), epsilon, center,
// scale, and gamma and beta (added in that order) with their initializers.
absl::Status ParseNormalization(const KerasFields& fields,
                                const ParseContext& context, LayerSpec* layer,
                                std::vector<VariableDef>* variables) {
  // The last axis: -1, or its index counting the batch; Keras writes a
  // list of one axis too.
  const int64_t rank = static_cast<int64_t>(layer->input_shape.size());
  if (const Json* axis = fields.Find("axis"); axis != nullptr) {
    const Json& value =
        axis->is_array() && axis->size() == 1 ? (*axis)[0] : *axis;
    if (!IsIntegerIn(value, -1, -1) && !IsIntegerIn(value, rank, rank)) {
      return fields.Unsupported("axis", *axis, "expected -1, the last axis");
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(const double epsilon,
                           fields.Number("epsilon", 1e-3));
  if (!(epsilon > 0)) {
    return fields.FieldError("epsilon", absl::StrCat(epsilon, " is not > 0"));
  }
  layer->epsilon = static_cast<float>(epsilon);
  PSTRAIN_ASSIGN_OR_RETURN(layer->center, fields.Bool("center", true));
  PSTRAIN_ASSIGN_OR_RETURN(layer->scale, fields.Bool("scale", true));
  for (const char* key : {"beta_regularizer", "gamma_regularizer",
                          "beta_constraint", "gamma_constraint"}) {
    PSTRAIN_RETURN_IF_ERROR(fields.ExpectNull(key));
  }
  layer->output_shape = layer->input_shape;
  const int64_t channels = layer->input_shape.back();
  Initializer ones;
  ones.mutable_constant()->set_value(1);
  Initializer zeros;
  zeros.mutable_zeros();
  if (layer->scale) {
    PSTRAIN_ASSIGN_OR_RETURN(
        Initializer gamma, ParseInitializer(fields, "gamma_initializer", ones));
    PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, "gamma", {channels},
                                        std::move(gamma), false, context.seed,
                                        layer, variables));
  }
  if (layer->center) {
    PSTRAIN_ASSIGN_OR_RETURN(
        Initializer beta, ParseInitializer(fields, "beta_initializer", zeros));
    PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, "beta", {channels},
                                        std::move(beta), false, context.seed,
                                        layer, variables));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseBatchNormalization(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kBatchNormalization;
  PSTRAIN_RETURN_IF_ERROR(
      ParseNormalization(fields, context, layer, variables));
  PSTRAIN_ASSIGN_OR_RETURN(const double momentum,
                           fields.Number("momentum", 0.99));
  if (!(momentum >= 0 && momentum < 1)) {
    return fields.FieldError("momentum",
                             absl::StrCat(momentum, " is out of range [0, 1)"));
  }
  layer->momentum = static_cast<float>(momentum);
  // Each replica normalizes with its own batch's statistics, as Keras's
  // data-parallel strategies do; synchronized statistics and
  // renormalization would compute something else.
  for (const char* key : {"synchronized", "renorm"}) {
    PSTRAIN_ASSIGN_OR_RETURN(const bool set, fields.Bool(key, false));
    if (set) return fields.Unsupported(key, Json(true), "expected false");
  }
  PSTRAIN_ASSIGN_OR_RETURN(const bool fused, fields.Bool("fused", false));
  (void)fused;  // tf.keras 2.x's choice of kernel: the same result.
  const int64_t channels = layer->input_shape.back();
  Initializer zeros;
  zeros.mutable_zeros();
  Initializer ones;
  ones.mutable_constant()->set_value(1);
  PSTRAIN_ASSIGN_OR_RETURN(
      Initializer mean,
      ParseInitializer(fields, "moving_mean_initializer", zeros));
  PSTRAIN_ASSIGN_OR_RETURN(
      Initializer variance,
      ParseInitializer(fields, "moving_variance_initializer", ones));
  PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, "moving_mean", {channels},
                                      std::move(mean), false, context.seed,
                                      layer, variables));
  variables->back().mutable_moving_average()->set_momentum(layer->momentum);
  PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, "moving_variance", {channels},
                                      std::move(variance), false, context.seed,
                                      layer, variables));
  variables->back().mutable_moving_average()->set_momentum(layer->momentum);
  return absl::OkStatus();
}

absl::Status ParseLayerNormalization(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kLayerNormalization;
  // Keras 3's RMS variant normalizes without centering: another formula.
  PSTRAIN_ASSIGN_OR_RETURN(const bool rms, fields.Bool("rms_scaling", false));
  if (rms)
    return fields.Unsupported("rms_scaling", Json(true), "expected false");
  return ParseNormalization(fields, context, layer, variables);
}

}  // namespace worker
}  // namespace pstrain
