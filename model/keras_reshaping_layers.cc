// The pooling layers other than MaxPooling2D (AveragePooling2D and the
// global pools), the reshaping layers (Reshape, Permute, ZeroPadding2D) and
// Rescaling.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/keras_layer_parsers.h"
#include "model/keras_layer_util.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// GlobalAveragePooling1D/2D and GlobalMaxPooling1D/2D over an input of
// `rank` ([steps, channels] or [height, width, channels]).
absl::Status ParseGlobalPooling(const KerasFields& fields, size_t rank,
                                bool max, LayerSpec* layer) {
  layer->kind = LayerKind::kGlobalPooling;
  layer->global_max = max;
  PSTRAIN_RETURN_IF_ERROR(ExpectRank(
      fields, *layer, rank,
      rank == 2 ? "[steps, channels]" : "[height, width, channels]"));
  PSTRAIN_RETURN_IF_ERROR(ExpectChannelsLast(fields));
  PSTRAIN_ASSIGN_OR_RETURN(const bool keepdims, fields.Bool("keepdims", false));
  const int64_t channels = layer->input_shape.back();
  // keepdims keeps the pooled axes as 1s: the same elements.
  layer->output_shape =
      keepdims ? std::vector<int64_t>(rank, 1) : std::vector<int64_t>{1};
  layer->output_shape.back() = channels;
  return absl::OkStatus();
}

// A pair of non-negative ints from an int n (n, n) or a list of two.
absl::StatusOr<std::pair<int, int>> PadPair(const KerasFields& fields,
                                            const std::string& key,
                                            const Json& value) {
  if (IsIntegerIn(value, 0, kMaxDim)) {
    return std::make_pair(value.get<int>(), value.get<int>());
  }
  if (value.is_array() && value.size() == 2 &&
      IsIntegerIn(value[0], 0, kMaxDim) && IsIntegerIn(value[1], 0, kMaxDim)) {
    return std::make_pair(value[0].get<int>(), value[1].get<int>());
  }
  return fields.FieldError(
      key, absl::StrCat("expected a non-negative integer or a list of two, "
                        "got ",
                        DescribeJson(value)));
}

}  // namespace

absl::Status ParseAveragePooling2D(const KerasFields& fields,
                                   const ParseContext&, LayerSpec* layer,
                                   std::vector<VariableDef>*) {
  layer->kind = LayerKind::kAveragePooling2D;
  PSTRAIN_ASSIGN_OR_RETURN(const Window pool,
                           fields.IntPair("pool_size", Window{2, 2}));
  return ParseWindow(fields, "pool_size", pool, pool, layer);
}

absl::Status ParseGlobalAveragePooling1D(const KerasFields& fields,
                                         const ParseContext&, LayerSpec* layer,
                                         std::vector<VariableDef>*) {
  return ParseGlobalPooling(fields, 2, /*max=*/false, layer);
}

absl::Status ParseGlobalAveragePooling2D(const KerasFields& fields,
                                         const ParseContext&, LayerSpec* layer,
                                         std::vector<VariableDef>*) {
  return ParseGlobalPooling(fields, 3, /*max=*/false, layer);
}

absl::Status ParseGlobalMaxPooling1D(const KerasFields& fields,
                                     const ParseContext&, LayerSpec* layer,
                                     std::vector<VariableDef>*) {
  return ParseGlobalPooling(fields, 2, /*max=*/true, layer);
}

absl::Status ParseGlobalMaxPooling2D(const KerasFields& fields,
                                     const ParseContext&, LayerSpec* layer,
                                     std::vector<VariableDef>*) {
  return ParseGlobalPooling(fields, 3, /*max=*/true, layer);
}

absl::Status ParseZeroPadding2D(const KerasFields& fields, const ParseContext&,
                                LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kZeroPadding2D;
  PSTRAIN_RETURN_IF_ERROR(
      ExpectRank(fields, *layer, 3, "[height, width, channels]"));
  PSTRAIN_RETURN_IF_ERROR(ExpectChannelsLast(fields));
  // padding: n, (rows, columns), or ((top, bottom), (left, right)).
  const Json* padding = fields.Find("padding");
  const Json value = padding == nullptr ? Json(1) : *padding;
  std::pair<int, int> rows, columns;
  if (value.is_array() && value.size() == 2 && value[0].is_array()) {
    PSTRAIN_ASSIGN_OR_RETURN(rows, PadPair(fields, "padding[0]", value[0]));
    PSTRAIN_ASSIGN_OR_RETURN(columns, PadPair(fields, "padding[1]", value[1]));
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(const auto both,
                             PadPair(fields, "padding", value));
    rows = {both.first, both.first};
    columns = {both.second, both.second};
  }
  layer->pad_top = rows.first;
  layer->pad_bottom = rows.second;
  layer->pad_left = columns.first;
  layer->pad_right = columns.second;
  layer->output_shape = {layer->input_shape[0] + rows.first + rows.second,
                         layer->input_shape[1] + columns.first + columns.second,
                         layer->input_shape[2]};
  return absl::OkStatus();
}

absl::Status ParseReshape(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kReshape;
  const Json* target = fields.Find("target_shape");
  if (target == nullptr) return fields.FieldError("target_shape", "missing");
  if (!target->is_array() || target->empty()) {
    return fields.FieldError(
        "target_shape",
        absl::StrCat("expected a list of dimensions, ", JsonGot(*target)));
  }
  const int64_t elements = Product(layer->input_shape);
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target->size(); ++i) {
    const Json& d = (*target)[i];
    if (IsIntegerIn(d, -1, -1) && unknown < 0) {
      unknown = static_cast<int>(i);
      layer->output_shape.push_back(-1);
      continue;
    }
    if (!IsIntegerIn(d, 1, kMaxDim)) {
      return fields.FieldError(
          absl::StrCat("target_shape[", i, "]"),
          absl::StrCat("expected a positive integer (or one -1), got ",
                       DescribeJson(d)));
    }
    known *= d.get<int64_t>();
    layer->output_shape.push_back(d.get<int64_t>());
  }
  if (unknown >= 0 && known > 0 && elements % known == 0) {
    layer->output_shape[unknown] = elements / known;
    known = elements;
  }
  if (known != elements) {
    return fields.FieldError(
        "target_shape",
        absl::StrCat(DescribeJson(*target), " does not hold the input ",
                     ShapeString(layer->input_shape), "'s ", elements,
                     " elements"));
  }
  return absl::OkStatus();
}

absl::Status ParsePermute(const KerasFields& fields, const ParseContext&,
                          LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kPermute;
  const Json* dims = fields.Find("dims");
  const size_t rank = layer->input_shape.size();
  // Keras's dims are 1-based (0 is the batch) and a permutation.
  std::vector<bool> seen(rank, false);
  bool valid = dims != nullptr && dims->is_array() && dims->size() == rank;
  for (size_t i = 0; valid && i < rank; ++i) {
    valid = IsIntegerIn((*dims)[i], 1, static_cast<int64_t>(rank)) &&
            !seen[(*dims)[i].get<int>() - 1];
    if (valid) {
      const int from = (*dims)[i].get<int>() - 1;
      seen[from] = true;
      layer->permutation.push_back(from);
      layer->output_shape.push_back(layer->input_shape[from]);
    }
  }
  if (!valid) {
    return fields.FieldError(
        "dims", absl::StrCat("expected a permutation of 1..", rank, ", got ",
                             dims == nullptr ? "none" : DescribeJson(*dims)));
  }
  return absl::OkStatus();
}

absl::Status ParseRescaling(const KerasFields& fields, const ParseContext&,
                            LayerSpec* layer, std::vector<VariableDef>*) {
  layer->kind = LayerKind::kRescaling;
  PSTRAIN_ASSIGN_OR_RETURN(const double scale,
                           fields.Number("scale", std::nullopt));
  PSTRAIN_ASSIGN_OR_RETURN(const double offset, fields.Number("offset", 0.0));
  layer->rescale = static_cast<float>(scale);
  layer->offset = static_cast<float>(offset);
  layer->output_shape = layer->input_shape;
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain
