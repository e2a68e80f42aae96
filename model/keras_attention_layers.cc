// The attention layers: MultiHeadAttention.
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/keras_layer_parsers.h"
#include "model/keras_layer_util.h"
#include "model/keras_objects.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {

using Json = nlohmann::json;

absl::Status ParseMultiHeadAttention(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables) {
  layer->kind = LayerKind::kMultiHeadAttention;
  const auto& shapes = layer->input_shapes;
  if (shapes.size() < 2 || shapes.size() > 3) {
    return fields.Error(absl::StrCat(
        "reads ", shapes.size(),
        " tensor(s); it needs query and value, and optionally key"));
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].size() != 2) {
      return fields.Error(
          absl::StrCat("input ", i, " has shape ", ShapeString(shapes[i]),
                       ": attention takes [sequence, features] per example"));
    }
  }
  const std::vector<int64_t>& query = shapes[0];
  const std::vector<int64_t>& value = shapes[1];
  const std::vector<int64_t>& key = shapes.size() == 3 ? shapes[2] : value;
  if (key[0] != value[0]) {
    return fields.Error(absl::StrCat("key ", ShapeString(key), " and value ",
                                     ShapeString(value),
                                     " differ in sequence length"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(layer->num_heads,
                           fields.Int("num_heads", 1, kMaxDim, std::nullopt));
  PSTRAIN_ASSIGN_OR_RETURN(layer->key_dim,
                           fields.Int("key_dim", 1, kMaxDim, std::nullopt));
  PSTRAIN_ASSIGN_OR_RETURN(layer->value_dim,
                           fields.Int("value_dim", 1, kMaxDim, layer->key_dim));
  PSTRAIN_ASSIGN_OR_RETURN(layer->use_bias, fields.Bool("use_bias", true));
  PSTRAIN_ASSIGN_OR_RETURN(const double dropout, fields.Number("dropout", 0.0));
  if (dropout != 0) {
    return fields.Unsupported("dropout", Json(dropout),
                              "expected 0: attention dropout is not computed");
  }
  // output_shape: null (the query's features), an int, or a list of one.
  layer->attention_output_dim = query[1];
  if (const Json* out = fields.Find("output_shape"); out != nullptr) {
    const Json& dim = out->is_array() && out->size() == 1 ? (*out)[0] : *out;
    if (!IsIntegerIn(dim, 1, kMaxDim)) {
      return fields.Unsupported("output_shape", *out,
                                "expected null or one positive integer");
    }
    layer->attention_output_dim = dim.get<int64_t>();
  }
  // Attention over the sequence axis only (Keras's default, also written
  // as that axis).
  if (const Json* axes = fields.Find("attention_axes"); axes != nullptr) {
    const Json& axis =
        axes->is_array() && axes->size() == 1 ? (*axes)[0] : *axes;
    if (!IsIntegerIn(axis, 1, 1) && !IsIntegerIn(axis, -2, -2)) {
      return fields.Unsupported("attention_axes", *axes,
                                "expected null, the sequence axis");
    }
  }
  // Keras 3.15's sliding_window and gate change what is computed.
  for (const char* key_name :
       {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
        "kernel_constraint", "bias_constraint", "sliding_window"}) {
    PSTRAIN_RETURN_IF_ERROR(fields.ExpectNull(key_name));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const bool gate, fields.Bool("use_gate", false));
  if (gate) return fields.Unsupported("use_gate", Json(true), "expected false");
  Initializer glorot;
  glorot.mutable_glorot_uniform();
  Initializer zeros;
  zeros.mutable_zeros();
  PSTRAIN_ASSIGN_OR_RETURN(
      const Initializer kernel_init,
      ParseInitializer(fields, "kernel_initializer", glorot));
  PSTRAIN_ASSIGN_OR_RETURN(const Initializer bias_init,
                           ParseInitializer(fields, "bias_initializer", zeros));
  const int64_t heads = layer->num_heads;
  const struct {
    const char* name;
    std::vector<int64_t> kernel;
    std::vector<int64_t> bias;
  } projections[] = {
      {"query", {query[1], heads, layer->key_dim}, {heads, layer->key_dim}},
      {"key", {key[1], heads, layer->key_dim}, {heads, layer->key_dim}},
      {"value", {value[1], heads, layer->value_dim}, {heads, layer->value_dim}},
      {"attention_output",
       {heads, layer->value_dim, layer->attention_output_dim},
       {layer->attention_output_dim}},
  };
  for (const auto& p : projections) {
    PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, absl::StrCat(p.name, "/kernel"),
                                        p.kernel, kernel_init, false,
                                        context.seed, layer, variables));
    if (!layer->use_bias) continue;
    PSTRAIN_RETURN_IF_ERROR(AddVariable(fields, absl::StrCat(p.name, "/bias"),
                                        p.bias, bias_init, false, context.seed,
                                        layer, variables));
  }
  layer->output_shape = {query[0], layer->attention_output_dim};
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain
