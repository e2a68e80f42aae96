#include "data/criteo_feed.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/criteo_line.h"

namespace pstrain {
namespace data {
namespace {

// The 1-based field number of "I<j>" (prefix 'I', max 13) or "C<k>"
// (prefix 'C', max 26), or 0.
int FieldNumber(absl::string_view name, char prefix, int max) {
  if (name.size() < 2 || name[0] != prefix || name[1] == '0') return 0;
  int number = 0;
  if (!absl::SimpleAtoi(name.substr(1), &number)) return 0;
  for (const char c : name.substr(1)) {
    if (c < '0' || c > '9') return 0;  // SimpleAtoi takes '+' and spaces.
  }
  return number >= 1 && number <= max ? number : 0;
}

}  // namespace

bool IsCriteoInput(absl::string_view name) {
  return name == "dense" || name == "sparse" ||
         FieldNumber(name, 'I', kCriteoDense) != 0 ||
         FieldNumber(name, 'C', kCriteoSparse) != 0;
}

absl::StatusOr<Tensor> CriteoInputTensor(const CriteoBatch& batch,
                                         absl::string_view name) {
  const int64_t rows = batch.size();
  if (name == "dense") {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t,
                             Tensor::Create(DT_FLOAT, {rows, kCriteoDense}));
    if (rows > 0) std::memcpy(t.raw_data(), batch.dense.data(), t.num_bytes());
    return t;
  }
  if (name == "sparse") {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t,
                             Tensor::Create(DT_INT64, {rows, kCriteoSparse}));
    if (rows > 0) std::memcpy(t.raw_data(), batch.sparse.data(), t.num_bytes());
    return t;
  }
  if (const int j = FieldNumber(name, 'I', kCriteoDense); j != 0) {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(DT_FLOAT, {rows, 1}));
    float* out = t.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      out[r] = batch.dense[r * kCriteoDense + j - 1];
    }
    return t;
  }
  if (const int k = FieldNumber(name, 'C', kCriteoSparse); k != 0) {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(DT_INT64, {rows, 1}));
    char* out = static_cast<char*>(t.raw_data());
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out + r * sizeof(uint64_t),
                  &batch.sparse[r * kCriteoSparse + k - 1], sizeof(uint64_t));
    }
    return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model input '", name,
                   "' is not a Criteo input: name the inputs dense and "
                   "sparse, or I1..I13 and C1..C26"));
}

absl::StatusOr<Tensor> CriteoLabelTensor(const CriteoBatch& batch) {
  PSTRAIN_ASSIGN_OR_RETURN(Tensor t,
                           Tensor::Create(DT_FLOAT, {batch.size(), 1}));
  if (batch.size() > 0) {
    std::memcpy(t.raw_data(), batch.labels.data(), t.num_bytes());
  }
  return t;
}

}  // namespace data
}  // namespace pstrain
