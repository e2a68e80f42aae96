// The calls of a layer in a Functional model (its "inbound_nodes"), in the
// forms keras_functional.h lists, and how a call's tensors and keyword
// arguments become the inputs of the layer it calls. A helper of
// keras_functional.
#ifndef PSTRAIN_MODEL_KERAS_CALLS_H_
#define PSTRAIN_MODEL_KERAS_CALLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/keras_fields.h"
#include "model/keras_layers.h"
#include "model/model_spec.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {

// A tensor as Keras names it: output `tensor` of call `node` of `layer`.
struct NodeRef {
  std::string layer;
  int node = 0;
  int tensor = 0;
};

// A keyword argument of a call that is not null: a tensor (`tensor` set,
// an entry of Call::tensors) or another value.
struct Keyword {
  std::string path;  // Where it is, for messages: "inbound_nodes[0].kwargs.x".
  std::string name;
  nlohmann::json value;
  int tensor = -1;
};

// One call of a layer (an inbound node): the tensors it reads, positional
// ones first, then those given by keyword.
struct Call {
  std::vector<NodeRef> tensors;
  int positional = 0;  // How many of `tensors` are positional.
  std::vector<Keyword> keywords;
};

// [layer, node, tensor] at `key` (for messages) of `fields`.
absl::StatusOr<NodeRef> ReadNodeRef(const KerasFields& fields,
                                    const std::string& key,
                                    const nlohmann::json& value);

// The calls in the "inbound_nodes" of `entry`.
absl::StatusOr<std::vector<Call>> ReadCalls(const LayerEntry& entry);

// The inputs of `call` of `entry`'s layer in the order the layer reads
// them, from `resolved` (Call::tensors resolved); honours the keywords the
// layer has (MultiHeadAttention's value, key and use_causal_mask, set in
// *spec) and refuses the others, naming them.
absl::StatusOr<std::vector<TensorRef>> ArrangeInputs(
    const LayerEntry& entry, const Call& call,
    const std::vector<TensorRef>& resolved, LayerSpec* spec);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_CALLS_H_
