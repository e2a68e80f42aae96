#include "worker/data/id_features.h"

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

}  // namespace

absl::Status ConvertFeaturesToIds(int64_t vocabulary, Dataset* dataset) {
  if (vocabulary < 1 || vocabulary > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a vocabulary of ", vocabulary, " ids is not in [1, 2^31)"));
  }
  const Tensor& features = dataset->features;
  const int64_t row = features.row_elements();
  PSTRAIN_ASSIGN_OR_RETURN(Tensor ids,
                           Tensor::Create(DT_INT32, features.shape()));
  int32_t* out = ids.data<int32_t>();
  for (int64_t i = 0; i < features.num_elements(); ++i) {
    const double value = FeatureValue(features, i);
    if (value != std::floor(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeFeature(*dataset, i / row, i % row), ": ",
                       value, " is not an integer id"));
    }
    if (value < 0 || value >= static_cast<double>(vocabulary)) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeFeature(*dataset, i / row, i % row), ": id ", value,
          " is outside the vocabulary [0, ", vocabulary, ")"));
    }
    out[i] = static_cast<int32_t>(value);
  }
  dataset->features = std::move(ids);
  return absl::OkStatus();
}

}  // namespace data
}  // namespace pstrain
