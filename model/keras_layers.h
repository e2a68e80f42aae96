// The layers of a Keras model that pstrain computes, each read from its
// config into a LayerSpec with its variables. Used by keras_model's
// Sequential and Functional parsers, which know the layer's input shape.
#ifndef PSTRAIN_MODEL_KERAS_LAYERS_H_
#define PSTRAIN_MODEL_KERAS_LAYERS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/keras_fields.h"
#include "model/keras_layer_util.h"
#include "model/model_spec.h"
#include "nlohmann/json.hpp"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

// One entry of a model's "layers" list, its class and name read and
// checked: one line each (they go into messages, logs and variable paths),
// a Keras class, a name that is non-empty and free of '/'.
struct LayerEntry {
  std::string class_name;
  std::string name;
  const nlohmann::json* json = nullptr;    // The entry.
  const nlohmann::json* config = nullptr;  // Its "config" object.
  // Starts its errors: "<prefix>layer 3 'dense' (Dense): ".
  std::string where;

  // The fields of its config, errors starting with `where`.
  KerasFields Fields() const { return KerasFields(*config, where); }
};

// Reads entry `index` of a "layers" list; `prefix` starts errors ("model: ").
absl::StatusOr<LayerEntry> ReadLayerEntry(const nlohmann::json& entry,
                                          absl::string_view prefix, int index);

// Reads a layer that computes (not an InputLayer) into `layer`, whose name,
// inputs and input shapes are set, appending its variables: refuses a class
// pstrain does not compute (naming the supported ones), a frozen layer and a
// dtype other than float32, then reads the class's own fields.
absl::Status ParseLayer(const LayerEntry& entry, const ParseContext& context,
                        LayerSpec* layer, std::vector<VariableDef>* variables);

// The per-example shape an InputLayer declares: Keras 3's "batch_shape" or
// tf.keras 2.x's "batch_input_shape".
absl::StatusOr<std::vector<int64_t>> ParseInputLayerShape(
    const KerasFields& fields);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_LAYERS_H_
