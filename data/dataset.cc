#include "data/dataset.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace data {
namespace {

// v / 255.0f for every byte: exact division, at a lookup's cost.
const std::array<float, 256>& ByteScale() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t;
    for (int v = 0; v < 256; ++v) t[v] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return table;
}

}  // namespace

absl::Status ValidateDataset(const Dataset& dataset) {
  const Tensor& features = dataset.features;
  if (features.dtype() != DT_UINT8 && features.dtype() != DT_FLOAT &&
      features.dtype() != DT_INT32) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset features are ", DataTypeName(features.dtype()),
                     "; expected uint8, float32 or int32 ids"));
  }
  if (features.shape().empty() || features.shape()[0] != dataset.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset features of shape ", ShapeString(features.shape()),
        " do not have one row for each of its ", dataset.size(), " labels"));
  }
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const int32_t label = dataset.labels[i];
    if (label < 0 || label >= dataset.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset label ", label, " at index ", i,
                       " is outside 0..", dataset.num_classes - 1));
    }
  }
  if (features.dtype() == DT_INT32) {
    const int32_t* ids = features.data<int32_t>();
    const int64_t row = features.row_elements();
    for (int64_t i = 0; i < features.num_elements(); ++i) {
      if (ids[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeFeature(dataset, i / row, i % row), ": id ",
                         ids[i], " is negative"));
      }
    }
  }
  return absl::OkStatus();
}

std::string DescribeFeature(const Dataset& dataset, int64_t index,
                            int64_t feature) {
  const DataOrigin& origin = dataset.origin;
  const std::string path =
      origin.path.empty() ? std::string("the dataset")
                          : absl::StrCat("'", origin.path, "'");
  if (index < static_cast<int64_t>(origin.lines.size()) &&
      feature < static_cast<int64_t>(origin.feature_columns.size())) {
    return absl::StrCat(path, ": line ", origin.lines[index], ", column ",
                        origin.feature_columns[feature]);
  }
  return absl::StrCat(path, ": example ", index, ", feature ", feature);
}

DataType FeedDtype(const Dataset& dataset) {
  return dataset.features.dtype() == DT_INT32 ? DT_INT32 : DT_FLOAT;
}

void GatherExamples(const Dataset& dataset, absl::Span<const int64_t> indices,
                    void* out) {
  const int64_t row = dataset.features.row_elements();
  if (dataset.features.dtype() != DT_INT32) {
    GatherFeatures(dataset, indices,
                   absl::MakeSpan(static_cast<float*>(out),
                                  indices.size() * row));
    return;
  }
  const int32_t* src = dataset.features.data<int32_t>();
  int32_t* dst = static_cast<int32_t*>(out);
  for (int64_t index : indices) {
    std::memcpy(dst, src + index * row, row * sizeof(int32_t));
    dst += row;
  }
}

void GatherFeatures(const Dataset& dataset, absl::Span<const int64_t> indices,
                    absl::Span<float> out) {
  const int64_t row = dataset.features.row_elements();
  if (static_cast<int64_t>(out.size()) !=
      static_cast<int64_t>(indices.size()) * row) {
    std::fprintf(
        stderr, "pstrain: GatherFeatures of %zu rows of %lld into %zu floats\n",
        indices.size(), static_cast<long long>(row), out.size());
    std::abort();
  }
  if (dataset.features.dtype() == DT_INT32) {
    std::fprintf(stderr, "pstrain: GatherFeatures of int32 ids as floats\n");
    std::abort();
  }
  float* dst = out.data();
  if (dataset.features.dtype() == DT_UINT8) {
    const std::array<float, 256>& scale = ByteScale();
    const uint8_t* src = dataset.features.data<uint8_t>();
    for (int64_t index : indices) {
      const uint8_t* p = src + index * row;
      for (int64_t j = 0; j < row; ++j) dst[j] = scale[p[j]];
      dst += row;
    }
  } else {
    const float* src = dataset.features.data<float>();
    for (int64_t index : indices) {
      std::memcpy(dst, src + index * row, row * sizeof(float));
      dst += row;
    }
  }
}

}  // namespace data
}  // namespace pstrain
