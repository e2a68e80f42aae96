#include "compute/dropout_base.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

DropoutBase::DropoutBase(int64_t num_elements, float rate)
    : num_elements_(num_elements),
      rate_(rate),
      scale_(1.0f / (1.0f - rate)),
      threshold_(static_cast<uint64_t>(
          std::llround(static_cast<double>(rate) * 4294967296.0))) {}

absl::Status DropoutBase::CheckArgs(int64_t num_elements, float rate) {
  if (num_elements <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dropout: num_elements must be positive, got ", num_elements));
  }
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout: rate must be in [0, 1), got ", rate));
  }
  return absl::OkStatus();
}

absl::Status DropoutBase::Forward(const float* x, const DropoutKey& key,
                                  float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("Dropout forward: x and y are required");
  }
  has_forward_ = false;
  const absl::Status status = RunForward(x, key, y);
  has_forward_ = status.ok();
  return status;
}

absl::Status DropoutBase::Backward(const float* dy, float* dx) {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        "Dropout backward: dy and dx are required");
  }
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "Dropout backward: no Forward has run");
  }
  return RunBackward(dy, dx);
}

}  // namespace worker
}  // namespace pstrain
