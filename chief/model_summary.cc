#include "chief/model_summary.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace chief {
namespace {

using worker::LayerKind;

// 1234567 -> "1,234,567", as Keras prints counts.
std::string WithCommas(int64_t n) {
  std::string digits = absl::StrCat(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(i, ",");
  }
  return digits;
}

int64_t Elements(const VariableDef& def) {
  int64_t n = 1;
  for (int64_t dim : def.shape().dims()) n *= std::max<int64_t>(dim, 0);
  return n;
}

}  // namespace

std::string LayerTypeName(const worker::LayerSpec& layer) {
  const bool one_d = layer.input_shape.size() == 2;
  switch (layer.kind) {
    case LayerKind::kConv2D:
      return layer.depthwise ? "DepthwiseConv2D" : one_d ? "Conv1D" : "Conv2D";
    case LayerKind::kMaxPool2D:
      return "MaxPooling2D";
    case LayerKind::kFlatten:
      return "Flatten";
    case LayerKind::kDense:
      return "Dense";
    case LayerKind::kDropout:
      return "Dropout";
    case LayerKind::kEmbedding:
      return "Embedding";
    case LayerKind::kActivation:
      return "Activation";
    case LayerKind::kMerge:
      switch (layer.merge) {
        case worker::MergeOp::kAdd:
          return "Add";
        case worker::MergeOp::kSubtract:
          return "Subtract";
        case worker::MergeOp::kMultiply:
          return "Multiply";
        case worker::MergeOp::kAverage:
          return "Average";
        case worker::MergeOp::kMaximum:
          return "Maximum";
        case worker::MergeOp::kMinimum:
          return "Minimum";
      }
      return "Merge";
    case LayerKind::kConcatenate:
      return "Concatenate";
    case LayerKind::kBatchNormalization:
      return "BatchNormalization";
    case LayerKind::kLayerNormalization:
      return "LayerNormalization";
    case LayerKind::kAveragePooling2D:
      return "AveragePooling2D";
    case LayerKind::kGlobalPooling:
      return absl::StrCat(
          layer.global_max ? "GlobalMaxPooling" : "GlobalAveragePooling",
          one_d ? "1D" : "2D");
    case LayerKind::kZeroPadding2D:
      return "ZeroPadding2D";
    case LayerKind::kReshape:
      return "Reshape";
    case LayerKind::kPermute:
      return "Permute";
    case LayerKind::kRescaling:
      return "Rescaling";
    case LayerKind::kMultiHeadAttention:
      return "MultiHeadAttention";
  }
  return "Layer";
}

std::string ModelSummary(const worker::ModelSpec& spec) {
  std::map<std::string, const VariableDef*> variables;
  int64_t trainable = 0;
  int64_t fixed = 0;
  for (const VariableDef& def : spec.variables) {
    variables[def.name()] = &def;
    (def.has_moving_average() ? fixed : trainable) += Elements(def);
  }
  std::string text = absl::StrCat(
      "Model: \"", spec.name, "\"\n\n",
      "| Layer (type) | Output Shape | Param # |\n|---|---|---:|\n");
  for (const worker::LayerSpec& layer : spec.layers) {
    int64_t params = 0;
    if (layer.shares < 0) {
      for (const std::string& name : layer.variables) {
        const auto def = variables.find(name);
        if (def != variables.end()) params += Elements(*def->second);
      }
    }
    std::vector<std::string> shape = {"None"};
    for (int64_t dim : layer.output_shape) shape.push_back(absl::StrCat(dim));
    absl::StrAppend(&text, "| ", layer.name, " (", LayerTypeName(layer),
                    ") | (", absl::StrJoin(shape, ", "), ") | ",
                    WithCommas(params), " |\n");
  }
  absl::StrAppend(&text, "\nTotal params: ", WithCommas(trainable + fixed),
                  "  \nTrainable params: ", WithCommas(trainable),
                  "  \nNon-trainable params: ", WithCommas(fixed), "\n");
  return text;
}

}  // namespace chief
}  // namespace pstrain
