#include "compute/weighted_op_checks.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

absl::Status CheckWeightedForward(absl::string_view op, const float* x,
                                  const float* w, const float* b,
                                  const float* y, bool use_bias) {
  if (x == nullptr || w == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " forward: x, w and y are required"));
  }
  if ((b != nullptr) != use_bias) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " forward: b must be given iff use_bias"));
  }
  return absl::OkStatus();
}

absl::Status CheckWeightedBackward(absl::string_view op, const float* x,
                                   const float* w, const float* dy,
                                   const float* dx, const float* dw,
                                   const float* db, bool compute_dx,
                                   bool use_bias) {
  if (x == nullptr || dy == nullptr || dw == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " backward: x, dy and dw are required"));
  }
  if ((dx != nullptr) != compute_dx || (compute_dx && w == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " backward: dx (and w) must be given iff compute_dx"));
  }
  if ((db != nullptr) != use_bias) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " backward: db must be given iff use_bias"));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain
