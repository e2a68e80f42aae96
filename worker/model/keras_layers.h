// The layers of a Keras model that pstrain computes, each read from its
// config into a LayerSpec with its variables. Used by keras_model's
// Sequential and Functional parsers, which know the layer's input shape.
#ifndef PSTRAIN_WORKER_MODEL_KERAS_LAYERS_H_
#define PSTRAIN_WORKER_MODEL_KERAS_LAYERS_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/training.pb.h"
#include "worker/model/keras_fields.h"
#include "worker/model/model_spec.h"

namespace pstrain {
namespace worker {

// Largest dimension, filter count or unit count accepted.
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

// Reads a layer's config from `fields`, fills `layer` (whose name and
// input_shape are set) and appends its variables, seeded from the run seed
// `seed`.
using LayerParser = absl::Status (*)(const KerasFields& fields, uint64_t seed,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);

// The parser of Keras class `class_name`; nullptr when pstrain does not
// compute it (the InputLayer is the model parsers' business).
LayerParser FindLayerParser(absl::string_view class_name);

// The supported classes, for messages: "InputLayer, Conv2D, ...".
extern const absl::string_view kSupportedLayers;

// Refuses every dtype but float32, as a string or a Keras dtype policy.
absl::Status ExpectFloat32(const KerasFields& fields);

// The per-example shape of the batch shape [batch, d1, d2, ...] in `key`;
// the batch dimension may be anything, the others must be known.
absl::StatusOr<std::vector<int64_t>> ParseBatchShape(const KerasFields& fields,
                                                     absl::string_view key);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_MODEL_KERAS_LAYERS_H_
