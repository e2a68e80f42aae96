// Keras objects nested in a layer's config that pstrain honours: the
// initializers of variables and the penalties of regularizers. A helper of
// the layer parsers (keras_layers.h).
#ifndef PSTRAIN_MODEL_KERAS_OBJECTS_H_
#define PSTRAIN_MODEL_KERAS_OBJECTS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/keras_fields.h"
#include "model/model_spec.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

// The initializer in field `key` of `fields`, `fallback` when absent or
// null: any of Keras's built-in initializers (VarianceScaling and its Glorot,
// He and LeCun forms, RandomNormal, RandomUniform, TruncatedNormal,
// Orthogonal, Identity, Zeros, Ones, Constant), as the object Keras 3,
// tf.keras 2 and TensorFlow.js write or as a bare identifier
// ("he_normal"), with Keras's defaults for absent parameters. Keras's "seed"
// is ignored: the variable's seed is derived from the run seed and its name.
// INVALID_ARGUMENT naming the field for an initializer pstrain does not have
// (the message lists those it has), or parameters out of range. Whether the
// initializer suits the variable (Orthogonal needs rank >= 2, ...) is
// ps::CheckInitializer's to say.
absl::StatusOr<Initializer> ParseInitializer(const KerasFields& fields,
                                             absl::string_view key,
                                             const Initializer& fallback);

// The regularizer in field `key` (Keras's L1, L2, L1L2 or their snake_case
// names, with Keras's defaults: L1 0.01, L2 0.01, L1L2 0 and 0); none when
// absent or null. INVALID_ARGUMENT naming the field for another class or a
// negative factor.
absl::StatusOr<Regularizer> ParseRegularizer(const KerasFields& fields,
                                             absl::string_view key);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_OBJECTS_H_
