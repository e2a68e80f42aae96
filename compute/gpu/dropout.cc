#include "compute/gpu/dropout.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/kernels.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<std::unique_ptr<DropoutOp>> DropoutOp::Create(
    int64_t num_elements, float rate, Device* device) {
  if (num_elements <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dropout: num_elements must be positive, got ", num_elements));
  }
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout: rate must be in [0, 1), got ", rate));
  }
  if (device == nullptr) {
    return absl::InvalidArgumentError("Dropout: device is required");
  }
  std::unique_ptr<DropoutOp> op(new DropoutOp(num_elements, rate, device));
  PSTRAIN_ASSIGN_OR_RETURN(op->mask_, device->Allocate(num_elements));
  return op;
}

DropoutOp::DropoutOp(int64_t num_elements, float rate, Device* device)
    : num_elements_(num_elements),
      rate_(rate),
      scale_(1.0f / (1.0f - rate)),
      threshold_(static_cast<uint64_t>(
          std::llround(static_cast<double>(rate) * 4294967296.0))),
      device_(device) {}

absl::Status DropoutOp::Forward(const float* x, const DropoutKey& key,
                                float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("Dropout forward: x and y are required");
  }
  has_forward_ = false;
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchDropoutForward(x, num_elements_, key.seed, key.step, key.offset,
                           threshold_, scale_, mask_.as<uint8_t>(), y,
                           device_->stream()),
      "Dropout forward"));
  has_forward_ = true;
  return absl::OkStatus();
}

absl::Status DropoutOp::Backward(const float* dy, float* dx) {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        "Dropout backward: dy and dx are required");
  }
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "Dropout backward: no Forward has run");
  }
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchDropoutBackward(dy, mask_.as<uint8_t>(), num_elements_, scale_, dx,
                            device_->stream()),
      "Dropout backward");
}

absl::Status DropoutOp::CopyMaskToHost(std::vector<uint8_t>* mask) {
  if (!has_forward_) {
    return absl::FailedPreconditionError("Dropout mask: no Forward has run");
  }
  mask->resize(num_elements_);
  return device_->CopyToHost(mask_.data(), mask_.bytes(), mask->data());
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
