#include "model/keras_calls.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

// Whether `value` is a Keras 3 tensor reference.
bool IsKerasTensor(const nlohmann::json& value) {
  return value.is_object() && value.contains("class_name") &&
         value["class_name"] == "__keras_tensor__";
}

absl::Status ReadKerasTensors(const KerasFields& fields, const std::string& key,
                              const Json& value, std::vector<NodeRef>* refs) {
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

// Adds the keyword arguments `kwargs` (at `key`) to `call`: a tensor is
// a Keras 3 tensor, or with `list_refs` (tf.keras 2.x) a [layer, node,
// tensor] list.
absl::Status ReadKeywordArguments(const KerasFields& fields,
                                  const std::string& key, const Json& kwargs,
                                  bool list_refs, Call* call) {
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

}  // namespace

absl::StatusOr<NodeRef> ReadNodeRef(const KerasFields& fields,
                                    const std::string& key, const Json& value) {
  if (!value.is_array() || value.size() < 3 || !value[0].is_string() ||
      !IsIntegerIn(value[1], 0, kMaxDim) ||
      !IsIntegerIn(value[2], 0, kMaxDim)) {
    return fields.FieldError(
        key, absl::StrCat("expected [layer name, node index, tensor index], "
                          "got ",
                          DescribeJson(value)));
  }
  return NodeRef{value[0].get<std::string>(), value[1].get<int>(),
                 value[2].get<int>()};
}

absl::StatusOr<std::vector<Call>> ReadCalls(const LayerEntry& entry) {
  const KerasFields fields(*entry.json, entry.where);
  std::vector<Call> calls;
  const Json* nodes = fields.Find("inbound_nodes");
  if (nodes == nullptr) return calls;
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
    calls.push_back(std::move(call));
  }
  return calls;
}

absl::StatusOr<std::vector<TensorRef>> ArrangeInputs(
    const LayerEntry& entry, const Call& call,
    const std::vector<TensorRef>& resolved, LayerSpec* spec) {
  const KerasFields fields(*entry.json, entry.where);
  std::vector<TensorRef> inputs(resolved.begin(),
                                resolved.begin() + call.positional);
  if (entry.class_name != "MultiHeadAttention") {
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
    } else if (keyword.name != "return_attention_scores" ||
               keyword.value != Json(false)) {  // false: the default.
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

}  // namespace worker
}  // namespace pstrain
