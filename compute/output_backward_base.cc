#include "compute/output_backward_base.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

absl::Status OutputBackwardBase::Forward(const float* x, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_, " forward: x and y are required"));
  }
  return RunForward(x, y);
}

absl::Status OutputBackwardBase::Backward(const float* y, const float* dy,
                                          float* dx) {
  if (y == nullptr || dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_, " backward: y, dy and dx are required"));
  }
  return RunBackward(y, dy, dx);
}

}  // namespace worker
}  // namespace pstrain
