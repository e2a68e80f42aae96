#include "worker/model/keras_functional.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_util.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"
#include "worker/model/keras_layers.h"
#include "worker/model/keras_sequential.h"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

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
  Json value;
  int tensor = -1;
};

// One call of a layer (an inbound node): the tensors it reads, positional
// ones first, then those given by keyword.
struct Call {
  std::vector<NodeRef> tensors;
  int positional = 0;  // How many of `tensors` are positional.
  std::vector<Keyword> keywords;
};

// One entry of "layers" and what has been made of it so far.
struct Entry {
  LayerEntry layer;
  std::vector<Call> calls;
  // Per call made, the tensor it produced (an InputLayer's one "call" is its
  // model input).
  std::vector<TensorRef> outputs;
  // The first call: what it read, and the layers it became
  // (model->layers[begin, end)), which later calls copy.
  std::vector<TensorRef> first_inputs;
  int begin = -1;
  int end = -1;
};

// Whether `value` is a Keras 3 tensor reference.
bool IsKerasTensor(const Json& value) {
  return value.is_object() && value.contains("class_name") &&
         value["class_name"] == "__keras_tensor__";
}

class FunctionalParser {
 public:
  FunctionalParser(const KerasFields& config, absl::string_view prefix,
                   const ParseContext& context, ModelSpec* model)
      : config_(config), prefix_(prefix), context_(context), model_(model) {}

  absl::Status Parse();

 private:
  absl::Status ReadEntries();
  // [layer, node, tensor] at `key` (for messages) of `fields`.
  absl::StatusOr<NodeRef> ReadNodeRef(const KerasFields& fields,
                                      const std::string& key,
                                      const Json& value) const;
  // The tensors of "input_layers" or "output_layers".
  absl::StatusOr<std::vector<NodeRef>> ReadEndpoints(absl::string_view key);
  absl::Status ReadCalls(Entry* entry);
  absl::Status ReadKerasTensors(const KerasFields& fields,
                                const std::string& key, const Json& value,
                                std::vector<NodeRef>* refs) const;
  // Adds the keyword arguments `kwargs` (at `key`) to `call`: a tensor is
  // a Keras 3 tensor, or with `list_refs` (tf.keras 2.x) a [layer, node,
  // tensor] list.
  absl::Status ReadKeywordArguments(const KerasFields& fields,
                                    const std::string& key, const Json& kwargs,
                                    bool list_refs, Call* call) const;
  // The inputs of a call of `entry` in the order its layer reads them, from
  // `resolved` (Call::tensors resolved); honours or refuses the keywords.
  absl::StatusOr<std::vector<TensorRef>> ArrangeInputs(
      const Entry& entry, const Call& call,
      const std::vector<TensorRef>& resolved, LayerSpec* spec) const;
  absl::Status AddInputs();
  // Makes every call, each once the tensors it reads exist.
  absl::Status MakeCalls();
  // Makes a call of `entry` reading `inputs`, into `spec` (what the call's
  // keywords set already).
  absl::Status MakeCall(Entry* entry, const std::vector<TensorRef>& inputs,
                        LayerSpec spec);
  // Why the calls left cannot be made.
  absl::Status Unresolvable() const;
  absl::StatusOr<TensorRef> Resolve(const Entry& reader,
                                    const NodeRef& ref) const;
  absl::Status SetOutputs(const std::vector<NodeRef>& outputs);
  absl::Status SetInputDtypes();

  const std::vector<int64_t>& Shape(const TensorRef& ref) const {
    return ref.model_input ? model_->inputs[ref.index].shape
                           : model_->layers[ref.index].output_shape;
  }
  // How a message names the tensor: "input 'x'" or "layer 'dense'".
  std::string Describe(const TensorRef& ref) const {
    return ref.model_input
               ? absl::StrCat("input '", model_->inputs[ref.index].name, "'")
               : absl::StrCat("layer '", model_->layers[ref.index].name, "'");
  }

  const KerasFields& config_;
  const std::string prefix_;
  const ParseContext context_;
  ModelSpec* const model_;
  std::vector<Entry> entries_;
  std::map<std::string, int> by_name_;  // Index in entries_.
};

absl::Status FunctionalParser::Parse() {
  PSTRAIN_RETURN_IF_ERROR(ReadEntries());
  PSTRAIN_RETURN_IF_ERROR(AddInputs());
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<NodeRef> outputs,
                           ReadEndpoints("output_layers"));
  PSTRAIN_RETURN_IF_ERROR(MakeCalls());
  PSTRAIN_RETURN_IF_ERROR(SetOutputs(outputs));
  return SetInputDtypes();
}

absl::Status FunctionalParser::ReadEntries() {
  const Json* layers = config_.Find("layers");
  if (layers == nullptr) return config_.FieldError("layers", "missing");
  if (!layers->is_array()) {
    return config_.FieldError(
        "layers", absl::StrCat("expected a list, ", JsonGot(*layers)));
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    Entry entry;
    PSTRAIN_ASSIGN_OR_RETURN(
        entry.layer,
        ReadLayerEntry((*layers)[i], prefix_, static_cast<int>(i)));
    const auto [seen, inserted] =
        by_name_.emplace(entry.layer.name, static_cast<int>(i));
    if (!inserted) {
      return entry.layer.Fields().FieldError(
          "name", absl::StrCat("\"", entry.layer.name,
                               "\" is also the name of layer ", seen->second));
    }
    PSTRAIN_RETURN_IF_ERROR(ReadCalls(&entry));
    entries_.push_back(std::move(entry));
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeRef> FunctionalParser::ReadNodeRef(
    const KerasFields& fields, const std::string& key,
    const Json& value) const {
  if (!value.is_array() || value.size() < 3 || !value[0].is_string() ||
      !IsIntegerIn(value[1], 0, kMaxDim) || !IsIntegerIn(value[2], 0, kMaxDim)) {
    return fields.FieldError(
        key, absl::StrCat("expected [layer name, node index, tensor index], "
                          "got ",
                          DescribeJson(value)));
  }
  return NodeRef{value[0].get<std::string>(), value[1].get<int>(),
                 value[2].get<int>()};
}

absl::StatusOr<std::vector<NodeRef>> FunctionalParser::ReadEndpoints(
    absl::string_view key) {
  const Json* value = config_.Find(key);
  if (value == nullptr) return config_.FieldError(key, "missing");
  std::vector<NodeRef> refs;
  if (value->is_array() && !value->empty() && (*value)[0].is_string()) {
    // Keras 3.11 on: a single tensor.
    PSTRAIN_ASSIGN_OR_RETURN(NodeRef ref,
                             ReadNodeRef(config_, std::string(key), *value));
    refs.push_back(std::move(ref));
  } else if (value->is_array() || value->is_object()) {
    // A list, or a dict of named tensors (Keras 3), read in key order.
    for (const auto& [name, item] : value->items()) {
      PSTRAIN_ASSIGN_OR_RETURN(
          NodeRef ref,
          ReadNodeRef(config_, absl::StrCat(key, "[", name, "]"), item));
      refs.push_back(std::move(ref));
    }
  } else {
    return config_.FieldError(
        key, absl::StrCat("expected a list of [layer, node, tensor], ",
                          JsonGot(*value)));
  }
  if (refs.empty()) return config_.FieldError(key, "is empty");
  return refs;
}

absl::Status FunctionalParser::ReadCalls(Entry* entry) {
  const KerasFields fields(*entry->layer.json, entry->layer.where);
  const Json* nodes = fields.Find("inbound_nodes");
  if (nodes == nullptr) return absl::OkStatus();
  if (!nodes->is_array()) {
    return fields.FieldError(
        "inbound_nodes", absl::StrCat("expected a list, ", JsonGot(*nodes)));
  }
  for (size_t n = 0; n < nodes->size(); ++n) {
    const std::string key = absl::StrCat("inbound_nodes[", n, "]");
    const Json& node = (*nodes)[n];
    Call call;
    if (node.is_object()) {
      // Keras 3: {"args": [...], "kwargs": {...}}.
      const KerasFields fields_of_call = fields.Nested(node, key);
      if (const Json* args = fields_of_call.Find("args"); args != nullptr) {
        PSTRAIN_RETURN_IF_ERROR(ReadKerasTensors(
            fields, absl::StrCat(key, ".args"), *args, &call.tensors));
      }
      call.positional = static_cast<int>(call.tensors.size());
      if (const Json* kwargs = fields_of_call.Find("kwargs");
          kwargs != nullptr) {
        PSTRAIN_RETURN_IF_ERROR(ReadKeywordArguments(
            fields, absl::StrCat(key, ".kwargs"), *kwargs, false, &call));
      }
    } else if (node.is_array()) {
      // tf.keras 2.x: [[layer, node, tensor, kwargs], ...].
      for (size_t t = 0; t < node.size(); ++t) {
        PSTRAIN_ASSIGN_OR_RETURN(
            NodeRef ref,
            ReadNodeRef(fields, absl::StrCat(key, "[", t, "]"), node[t]));
        call.tensors.push_back(std::move(ref));
      }
      call.positional = static_cast<int>(call.tensors.size());
      for (size_t t = 0; t < node.size(); ++t) {
        if (node[t].size() <= 3) continue;
        PSTRAIN_RETURN_IF_ERROR(
            ReadKeywordArguments(fields, absl::StrCat(key, "[", t, "][3]"),
                                 node[t][3], true, &call));
      }
    } else {
      return fields.FieldError(
          key, absl::StrCat("expected an object or a list, ", JsonGot(node)));
    }
    if (call.tensors.empty()) return fields.FieldError(key, "reads no tensor");
    entry->calls.push_back(std::move(call));
  }
  return absl::OkStatus();
}

absl::Status FunctionalParser::ReadKerasTensors(
    const KerasFields& fields, const std::string& key, const Json& value,
    std::vector<NodeRef>* refs) const {
  if (IsKerasTensor(value)) {
    const Json* config = value.contains("config") ? &value["config"] : nullptr;
    if (config == nullptr || !config->is_object() ||
        !config->contains("keras_history")) {
      return fields.FieldError(key, "a tensor without keras_history");
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        NodeRef ref,
        ReadNodeRef(fields, absl::StrCat(key, ".config.keras_history"),
                    (*config)["keras_history"]));
    refs->push_back(std::move(ref));
    return absl::OkStatus();
  }
  if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      PSTRAIN_RETURN_IF_ERROR(ReadKerasTensors(
          fields, absl::StrCat(key, "[", i, "]"), value[i], refs));
    }
    return absl::OkStatus();
  }
  return fields.FieldError(
      key, absl::StrCat(DescribeJson(value),
                        " is not a tensor: arguments other than tensors are "
                        "not supported"));
}

absl::Status FunctionalParser::ReadKeywordArguments(const KerasFields& fields,
                                                    const std::string& key,
                                                    const Json& kwargs,
                                                    bool list_refs,
                                                    Call* call) const {
  if (!kwargs.is_object()) {
    return fields.FieldError(
        key, absl::StrCat("expected an object, ", JsonGot(kwargs)));
  }
  for (const auto& [name, value] : kwargs.items()) {
    // null is every keyword's default ("mask", "training": as the run goes).
    if (value.is_null()) continue;
    Keyword keyword;
    keyword.path = absl::StrCat(key, ".", name);
    keyword.name = name;
    keyword.value = value;
    const bool list_ref = list_refs && value.is_array() && value.size() >= 3 &&
                          value[0].is_string();
    if (IsKerasTensor(value) || list_ref) {
      std::vector<NodeRef> refs;
      if (list_ref) {
        PSTRAIN_ASSIGN_OR_RETURN(NodeRef ref,
                                 ReadNodeRef(fields, keyword.path, value));
        refs.push_back(std::move(ref));
      } else {
        PSTRAIN_RETURN_IF_ERROR(
            ReadKerasTensors(fields, keyword.path, value, &refs));
      }
      keyword.tensor = static_cast<int>(call->tensors.size());
      call->tensors.push_back(refs[0]);
    }
    call->keywords.push_back(std::move(keyword));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorRef>> FunctionalParser::ArrangeInputs(
    const Entry& entry, const Call& call,
    const std::vector<TensorRef>& resolved, LayerSpec* spec) const {
  const KerasFields fields(*entry.layer.json, entry.layer.where);
  std::vector<TensorRef> inputs(resolved.begin(),
                                resolved.begin() + call.positional);
  if (entry.layer.class_name != "MultiHeadAttention") {
    if (!call.keywords.empty()) {
      const Keyword& first = call.keywords.front();
      return fields.FieldError(
          first.path,
          absl::StrCat(
              first.tensor >= 0 ? "a tensor" : DescribeJson(first.value),
              " is not supported (expected null)"));
    }
    return inputs;
  }
  // MultiHeadAttention(query, value, key=None, use_causal_mask=False, ...).
  constexpr const char* kSlots[] = {"query", "value", "key"};
  std::vector<std::optional<TensorRef>> slots(3);
  for (size_t i = 0; i < inputs.size() && i < 3; ++i) slots[i] = inputs[i];
  for (const Keyword& keyword : call.keywords) {
    int slot = -1;
    for (int i = 0; i < 3; ++i) {
      if (keyword.name == kSlots[i]) slot = i;
    }
    if (keyword.tensor >= 0 && slot >= 0 && !slots[slot].has_value()) {
      slots[slot] = resolved[keyword.tensor];
    } else if (keyword.name == "use_causal_mask" &&
               keyword.value.is_boolean()) {
      spec->causal = keyword.value.get<bool>();
    } else if (keyword.name == "return_attention_scores" &&
               keyword.value == Json(false)) {
    } else {
      return fields.FieldError(
          keyword.path,
          absl::StrCat(
              keyword.tensor >= 0 ? "a tensor" : DescribeJson(keyword.value),
              " is not supported (expected a query, value or key "
              "tensor, use_causal_mask, or null)"));
    }
  }
  if (inputs.size() > 3 || !slots[0].has_value() || !slots[1].has_value()) {
    return fields.Error(
        "expected a query and a value tensor, and optionally a key");
  }
  inputs = {*slots[0], *slots[1]};
  if (slots[2].has_value()) inputs.push_back(*slots[2]);
  return inputs;
}

absl::Status FunctionalParser::AddInputs() {
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<NodeRef> inputs,
                           ReadEndpoints("input_layers"));
  for (const NodeRef& ref : inputs) {
    const auto found = by_name_.find(ref.layer);
    if (found == by_name_.end()) {
      return config_.FieldError(
          "input_layers",
          absl::StrCat("'", ref.layer, "' is not a layer of the model"));
    }
    Entry& entry = entries_[found->second];
    const KerasFields fields = entry.layer.Fields();
    if (entry.layer.class_name != "InputLayer") {
      return config_.FieldError(
          "input_layers", absl::StrCat("'", ref.layer, "' is a ",
                                       entry.layer.class_name,
                                       ", not an InputLayer"));
    }
    if (ref.node != 0 || ref.tensor != 0 || !entry.outputs.empty()) {
      return config_.FieldError(
          "input_layers", absl::StrCat("names '", ref.layer, "' [",
                                       ref.node, ", ", ref.tensor,
                                       "]: expected it once, as [0, 0]"));
    }
    for (const char* key : {"ragged", "optional"}) {
      PSTRAIN_ASSIGN_OR_RETURN(const bool set, fields.Bool(key, false));
      if (set) return fields.Unsupported(key, Json(true), "expected false");
    }
    InputSpec input;
    input.name = entry.layer.name;
    PSTRAIN_ASSIGN_OR_RETURN(input.shape, ParseInputLayerShape(fields));
    entry.outputs.push_back(
        TensorRef{true, static_cast<int>(model_->inputs.size())});
    model_->inputs.push_back(std::move(input));
  }
  for (const Entry& entry : entries_) {
    if (entry.layer.class_name == "InputLayer" && entry.outputs.empty()) {
      return entry.layer.Fields().Error(
          "is not among the model's input_layers");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorRef> FunctionalParser::Resolve(const Entry& reader,
                                                    const NodeRef& ref) const {
  const auto found = by_name_.find(ref.layer);
  const KerasFields fields = reader.layer.Fields();
  if (found == by_name_.end()) {
    return fields.Error(absl::StrCat("reads a tensor of '", ref.layer,
                                     "', which is not a layer of the model"));
  }
  const Entry& source = entries_[found->second];
  const size_t calls = source.layer.class_name == "InputLayer"
                           ? 1
                           : source.calls.size();
  if (static_cast<size_t>(ref.node) >= calls) {
    return fields.Error(absl::StrCat("reads call ", ref.node, " of '",
                                     ref.layer, "', which is called ", calls,
                                     " time(s)"));
  }
  if (ref.tensor != 0) {
    return fields.Error(absl::StrCat("reads output ", ref.tensor, " of '",
                                     ref.layer,
                                     "', which has one output (0)"));
  }
  return source.outputs.size() > static_cast<size_t>(ref.node)
             ? absl::StatusOr<TensorRef>(source.outputs[ref.node])
             : absl::UnavailableError("not made yet");
}

absl::Status FunctionalParser::MakeCalls() {
  for (bool progress = true; progress;) {
    progress = false;
    for (Entry& entry : entries_) {
      // A layer's calls are made in order: node n is its n-th call.
      while (entry.outputs.size() < entry.calls.size()) {
        const Call& call = entry.calls[entry.outputs.size()];
        std::vector<TensorRef> resolved;
        for (const NodeRef& ref : call.tensors) {
          absl::StatusOr<TensorRef> input = Resolve(entry, ref);
          if (absl::IsUnavailable(input.status())) break;
          PSTRAIN_RETURN_IF_ERROR(input.status());
          resolved.push_back(*input);
        }
        if (resolved.size() < call.tensors.size()) break;
        LayerSpec spec;
        PSTRAIN_ASSIGN_OR_RETURN(const std::vector<TensorRef> inputs,
                                 ArrangeInputs(entry, call, resolved, &spec));
        PSTRAIN_RETURN_IF_ERROR(MakeCall(&entry, inputs, std::move(spec)));
        progress = true;
      }
    }
  }
  return Unresolvable();
}

absl::Status FunctionalParser::Unresolvable() const {
  std::vector<std::string> waiting;
  for (const Entry& entry : entries_) {
    if (entry.outputs.size() < entry.calls.size()) {
      waiting.push_back(absl::StrCat("'", entry.layer.name, "'"));
    }
  }
  if (waiting.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      prefix_, "layers ", absl::StrJoin(waiting, ", "),
      " read each other's outputs: the graph has a cycle"));
}

absl::Status FunctionalParser::MakeCall(Entry* entry,
                                        const std::vector<TensorRef>& inputs,
                                        LayerSpec spec) {
  const LayerEntry& layer = entry->layer;
  const KerasFields fields = layer.Fields();
  const int begin = static_cast<int>(model_->layers.size());
  if (entry->begin >= 0) {
    // Another call of a layer already made: the same layers, weights shared.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (Shape(inputs[i]) != Shape(entry->first_inputs[i])) {
        return fields.Error(absl::StrCat(
            "is called on ", Describe(inputs[i]), " of shape ",
            ShapeString(Shape(inputs[i])), " but first on ",
            ShapeString(Shape(entry->first_inputs[i])),
            ": a shared layer must see one input shape"));
      }
    }
    for (int i = entry->begin; i < entry->end; ++i) {
      LayerSpec copy = model_->layers[i];
      copy.shares = i;
      for (TensorRef& ref : copy.inputs) {
        if (!ref.model_input && ref.index >= entry->begin &&
            ref.index < entry->end) {
          ref.index += begin - entry->begin;
        } else {
          for (size_t k = 0; k < inputs.size(); ++k) {
            if (ref == entry->first_inputs[k]) ref = inputs[k];
          }
        }
      }
      model_->layers.push_back(std::move(copy));
    }
  } else if (layer.class_name == "Sequential") {
    if (inputs.size() != 1) {
      return fields.Error(absl::StrCat("reads ", inputs.size(),
                                       " tensors; a Sequential model reads "
                                       "one"));
    }
    SequentialContext context;
    context.prefix = layer.where;
    context.name_prefix = absl::StrCat(layer.name, "/");
    context.parse = context_;
    context.input = inputs[0];
    context.input_shape = Shape(inputs[0]);
    PSTRAIN_RETURN_IF_ERROR(
        AppendSequential(KerasFields(*layer.config, layer.where, "config."),
                         context, model_)
            .status());
  } else if (layer.class_name == "Functional" || layer.class_name == "Model") {
    return fields.Error(
        "a Functional model nested in another is not supported (a nested "
        "Sequential model is)");
  } else {
    spec.name = layer.name;
    spec.inputs = inputs;
    for (const TensorRef& input : inputs) {
      spec.input_shapes.push_back(Shape(input));
    }
    spec.input_shape = spec.input_shapes[0];
    PSTRAIN_RETURN_IF_ERROR(
        ParseLayer(layer, context_, &spec, &model_->variables));
    model_->layers.push_back(std::move(spec));
  }
  if (entry->begin < 0) {
    entry->begin = begin;
    entry->end = static_cast<int>(model_->layers.size());
    entry->first_inputs = inputs;
  }
  entry->outputs.push_back(
      TensorRef{false, static_cast<int>(model_->layers.size()) - 1});
  return absl::OkStatus();
}

absl::Status FunctionalParser::SetOutputs(const std::vector<NodeRef>& outputs) {
  if (outputs.size() != 1) {
    std::vector<std::string> names;
    for (const NodeRef& ref : outputs) names.push_back(ref.layer);
    return config_.FieldError(
        "output_layers",
        absl::StrCat("names ", outputs.size(), " outputs (",
                     absl::StrJoin(names, ", "),
                     "); several outputs are not supported yet"));
  }
  const auto found = by_name_.find(outputs[0].layer);
  if (found == by_name_.end()) {
    return config_.FieldError(
        "output_layers", absl::StrCat("'", outputs[0].layer,
                                      "' is not a layer of the model"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const TensorRef output,
                           Resolve(entries_[found->second], outputs[0]));
  if (output.model_input) {
    return config_.FieldError(
        "output_layers", absl::StrCat("'", outputs[0].layer,
                                      "' is an input, not a layer's output"));
  }
  model_->outputs = {output.index};
  return absl::OkStatus();
}

absl::Status FunctionalParser::SetInputDtypes() {
  for (size_t k = 0; k < model_->inputs.size(); ++k) {
    InputSpec& input = model_->inputs[k];
    const LayerSpec* embedding = nullptr;
    const LayerSpec* other = nullptr;
    for (const LayerSpec& layer : model_->layers) {
      for (const TensorRef& ref : layer.inputs) {
        if (!(ref == TensorRef{true, static_cast<int>(k)})) continue;
        (layer.kind == LayerKind::kEmbedding ? embedding : other) = &layer;
      }
    }
    const std::string where =
        absl::StrCat(prefix_, "input '", input.name, "': ");
    if (embedding == nullptr && other == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "no layer reads it"));
    }
    if (embedding != nullptr && other != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "read both by Embedding '", embedding->name,
          "' (as integer ids) and by '", other->name,
          "' (as floats); give each its own input"));
    }
    if (embedding != nullptr) input.dtype = DT_INT32;
  }
  for (const LayerSpec& layer : model_->layers) {
    if (layer.kind == LayerKind::kEmbedding && !layer.inputs[0].model_input) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix_, "layer '", layer.name, "' (Embedding) reads ",
          Describe(layer.inputs[0]),
          ": an Embedding must read a model input (its integer ids)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseFunctional(const KerasFields& config,
                             absl::string_view prefix,
                             const ParseContext& context, ModelSpec* model) {
  return FunctionalParser(config, prefix, context, model).Parse();
}

}  // namespace worker
}  // namespace pstrain
