#include "model/keras_functional.h"

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
#include "model/keras_calls.h"
#include "model/keras_layers.h"
#include "model/keras_sequential.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

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

class FunctionalParser {
 public:
  FunctionalParser(const KerasFields& config, absl::string_view prefix,
                   const ParseContext& context, ModelSpec* model)
      : config_(config), prefix_(prefix), context_(context), model_(model) {}

  absl::Status Parse();

 private:
  absl::Status ReadEntries();
  // The tensors of "input_layers" or "output_layers".
  absl::StatusOr<std::vector<NodeRef>> ReadEndpoints(absl::string_view key);
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
    PSTRAIN_ASSIGN_OR_RETURN(entry.calls, ReadCalls(entry.layer));
    entries_.push_back(std::move(entry));
  }
  return absl::OkStatus();
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
        PSTRAIN_ASSIGN_OR_RETURN(
            const std::vector<TensorRef> inputs,
            ArrangeInputs(entry.layer, call, resolved, &spec));
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
