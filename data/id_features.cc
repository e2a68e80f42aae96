#include "data/id_features.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"

namespace pstrain {
namespace data {
namespace {

// The feature as a double, whatever the dataset's dtype.
double FeatureValue(const Tensor& features, int64_t i) {
  switch (features.dtype()) {
    case DT_UINT8:
      return features.data<uint8_t>()[i];
    case DT_INT32:
      return features.data<int32_t>()[i];
    default:
      return features.data<float>()[i];
  }
}

absl::Status CheckVocabulary(int64_t vocabulary) {
  if (vocabulary < 1 || vocabulary > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a vocabulary of ", vocabulary, " ids is not in [1, 2^31)"));
  }
  return absl::OkStatus();
}

// OK when feature i (a flat index) is an id in [0, vocabulary).
absl::Status CheckId(const Dataset& dataset, int64_t i, int64_t vocabulary) {
  const int64_t row = dataset.features.row_elements();
  const double value = FeatureValue(dataset.features, i);
  if (value != std::floor(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeFeature(dataset, i / row, i % row), ": ", value,
                     " is not an integer id"));
  }
  if (value < 0 || value >= static_cast<double>(vocabulary)) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeFeature(dataset, i / row, i % row), ": id ", value,
                     " is outside the vocabulary [0, ", vocabulary, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ConvertFeaturesToIds(int64_t vocabulary, Dataset* dataset) {
  PSTRAIN_RETURN_IF_ERROR(CheckVocabulary(vocabulary));
  const Tensor& features = dataset->features;
  PSTRAIN_ASSIGN_OR_RETURN(Tensor ids,
                           Tensor::Create(DT_INT32, features.shape()));
  int32_t* out = ids.data<int32_t>();
  for (int64_t i = 0; i < features.num_elements(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(CheckId(*dataset, i, vocabulary));
    out[i] = static_cast<int32_t>(FeatureValue(features, i));
  }
  dataset->features = std::move(ids);
  return absl::OkStatus();
}

absl::Status CheckIds(const Dataset& dataset, int64_t begin, int64_t count,
                      int64_t vocabulary) {
  PSTRAIN_RETURN_IF_ERROR(CheckVocabulary(vocabulary));
  const int64_t row = dataset.features.row_elements();
  for (int64_t e = 0; e < dataset.size(); ++e) {
    for (int64_t f = begin; f < begin + count; ++f) {
      PSTRAIN_RETURN_IF_ERROR(CheckId(dataset, e * row + f, vocabulary));
    }
  }
  return absl::OkStatus();
}

}  // namespace data
}  // namespace pstrain
