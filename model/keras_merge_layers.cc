// The merge layers: Add, Subtract, Multiply, Average, Maximum, Minimum,
// Concatenate.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/keras_layer_parsers.h"
#include "model/keras_layer_util.h"

namespace pstrain {
namespace worker {
namespace {

// Merge layers: every input of one shape (Keras's broadcasting is not
// supported), at least two (Subtract: exactly two).
absl::Status ParseMerge(const KerasFields& fields, MergeOp op,
                        LayerSpec* layer) {
  layer->kind = LayerKind::kMerge;
  layer->merge = op;
  const size_t n = layer->input_shapes.size();
  if (n < 2 || (op == MergeOp::kSubtract && n != 2)) {
    return fields.Error(
        absl::StrCat("reads ", n, " tensor(s); it needs ",
                     op == MergeOp::kSubtract ? "exactly 2" : "at least 2"));
  }
  for (size_t i = 1; i < n; ++i) {
    if (layer->input_shapes[i] != layer->input_shapes[0]) {
      return fields.Error(absl::StrCat(
          "input ", i, " has shape ", ShapeString(layer->input_shapes[i]),
          ", input 0 ", ShapeString(layer->input_shapes[0]),
          ": merged inputs must have one shape"));
    }
  }
  layer->output_shape = layer->input_shape;
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseAdd(const KerasFields& fields, const ParseContext&,
                      LayerSpec* layer, std::vector<VariableDef>*) {
  return ParseMerge(fields, MergeOp::kAdd, layer);
}
absl::Status ParseSubtract(const KerasFields& fields, const ParseContext&,
                           LayerSpec* layer, std::vector<VariableDef>*) {
  return ParseMerge(fields, MergeOp::kSubtract, layer);
}
absl::Status ParseMultiply(const KerasFields& fields, const ParseContext&,
                           LayerSpec* layer, std::vector<VariableDef>*) {
  return ParseMerge(fields, MergeOp::kMultiply, layer);
}
absl::Status ParseAverage(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  return ParseMerge(fields, MergeOp::kAverage, layer);
}
absl::Status ParseMaximum(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  return ParseMerge(fields, MergeOp::kMaximum, layer);
}
absl::Status ParseMinimum(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  return ParseMerge(fields, MergeOp::kMinimum, layer);
}

absl::Status ParseConcatenate(const KerasFields& fields, const ParseContext&,
                              LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kConcatenate;
  const std::vector<std::vector<int64_t>>& shapes = layer->input_shapes;
  if (shapes.size() < 2) {
    return fields.Error(absl::StrCat("reads ", shapes.size(),
                                     " tensor(s); it needs at least 2"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(layer->axis,
                           ParseAxis(fields, shapes[0].size(), -1));
  layer->output_shape = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    bool match = shapes[i].size() == shapes[0].size();
    for (size_t d = 0; match && d < shapes[0].size(); ++d) {
      match =
          static_cast<int>(d) == layer->axis || shapes[i][d] == shapes[0][d];
    }
    if (!match) {
      return fields.Error(
          absl::StrCat("input ", i, " has shape ", ShapeString(shapes[i]),
                       ", input 0 ", ShapeString(shapes[0]),
                       ": they must agree but on axis ", layer->axis + 1));
    }
    layer->output_shape[layer->axis] += shapes[i][layer->axis];
  }
  return absl::OkStatus();
}
}  // namespace worker
}  // namespace pstrain
