// A Keras Sequential model's layers, each reading the one before: read on its
// own (the whole model) or as a layer of a Functional model (keras_model.h).
#ifndef PSTRAIN_MODEL_KERAS_SEQUENTIAL_H_
#define PSTRAIN_MODEL_KERAS_SEQUENTIAL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/keras_fields.h"
#include "model/keras_layers.h"
#include "model/model_spec.h"

namespace pstrain {
namespace worker {

struct SequentialContext {
  // Starts errors: "model: ", or the nesting layer's "model: layer 2 'seq'
  // (Sequential): ".
  std::string prefix;
  // Put before its layers' names: "" for the whole model, "seq/" for one
  // nested in a Functional model.
  std::string name_prefix;
  ParseContext parse;
  // Nested: what its first layer reads, and its shape. Unset for the whole
  // model, whose input comes from its InputLayer, its first layer's
  // batch_input_shape (tf.keras 2.x) or its build_input_shape, and is added
  // to the ModelSpec's inputs.
  std::optional<TensorRef> input;
  std::vector<int64_t> input_shape;
};

// Appends the layers and variables of the Sequential model whose "config"
// is read by `config` to `model`, each layer reading the one before.
// Returns the index of its last layer in model->layers. INVALID_ARGUMENT
// naming the layer for what keras_layers refuses, a misplaced InputLayer or
// Embedding, a repeated name, or no layers.
absl::StatusOr<int> AppendSequential(const KerasFields& config,
                                     const SequentialContext& context,
                                     ModelSpec* model);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_SEQUENTIAL_H_
