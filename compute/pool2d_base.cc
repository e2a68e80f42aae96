#include "compute/pool2d_base.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

absl::Status Pool2DBase::Forward(const float* x, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_, " forward: x and y are required"));
  }
  has_forward_ = false;
  const absl::Status status = RunForward(x, y);
  has_forward_ = status.ok();
  return status;
}

absl::Status Pool2DBase::Backward(const float* dy, float* dx) {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_, " backward: dy and dx are required"));
  }
  if (backward_needs_forward_ && !has_forward_) {
    return absl::FailedPreconditionError(
        absl::StrCat(op_, " backward: no Forward has run"));
  }
  return RunBackward(dy, dx);
}

}  // namespace worker
}  // namespace pstrain
