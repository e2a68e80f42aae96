// A Keras Functional model: layers wired into a graph by their
// "inbound_nodes", in every form that writes one:
//   Keras 3        "class_name": "Functional"; each call of a layer an
//                  inbound node {"args": [...], "kwargs": {...}} whose
//                  tensors are {"class_name": "__keras_tensor__", "config":
//                  {"keras_history": [layer, node, tensor], ...}}, a merge
//                  layer's inputs one list argument; "input_layers" /
//                  "output_layers" a list of [layer, node, tensor], a single
//                  [layer, node, tensor] (Keras 3.11 on) or a dict.
//   tf.keras 2.x   "class_name": "Functional" or "Model" (what TensorFlow.js
//                  writes too); each call a list [[layer, node, tensor,
//                  kwargs], ...].
// A Sequential model used as a layer is expanded into its layers, named
// "<sequential>/<layer>". A layer called several times appears once per
// call, sharing its variables (LayerSpec::shares).
#ifndef PSTRAIN_MODEL_KERAS_FUNCTIONAL_H_
#define PSTRAIN_MODEL_KERAS_FUNCTIONAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "model/keras_fields.h"
#include "model/keras_layers.h"
#include "model/model_spec.h"

namespace pstrain {
namespace worker {

// Reads the Functional model whose "config" is read by `config` into
// `model`'s inputs, layers (in an order where each comes after what it
// reads), variables and outputs. `prefix` starts errors ("model: ").
// INVALID_ARGUMENT, naming the layers involved, for what keras_layers refuses,
// a call argument that is not a tensor or a keyword argument that would change
// the computation, a tensor of an unknown layer or call, a cycle, an InputLayer
// that is not among "input_layers" or that no layer reads, a layer called on
// another input shape than at its first call, an Embedding that does not read a
// model input, a model input that feeds both an Embedding and another layer,
// and (not supported yet) several outputs or a nested Functional model.
absl::Status ParseFunctional(const KerasFields& config,
                             absl::string_view prefix,
                             const ParseContext& context, ModelSpec* model);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_FUNCTIONAL_H_
