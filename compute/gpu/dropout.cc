#include "compute/gpu/dropout.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/kernels.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<std::unique_ptr<DropoutOp>> DropoutOp::Create(
    int64_t num_elements, float rate, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(num_elements, rate));
  if (device == nullptr) {
    return absl::InvalidArgumentError("Dropout: device is required");
  }
  std::unique_ptr<DropoutOp> op(new DropoutOp(num_elements, rate, device));
  PSTRAIN_ASSIGN_OR_RETURN(op->mask_, device->Allocate(num_elements));
  return op;
}

absl::Status DropoutOp::RunForward(const float* x, const DropoutKey& key,
                                   float* y) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchDropoutForward(x, num_elements_, key.seed, key.step, key.offset,
                           threshold_, scale_, mask_.as<uint8_t>(), y,
                           device_->stream()),
      "Dropout forward");
}

absl::Status DropoutOp::RunBackward(const float* dy, float* dx) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchDropoutBackward(dy, mask_.as<uint8_t>(), num_elements_, scale_, dx,
                            device_->stream()),
      "Dropout backward");
}

absl::Status DropoutOp::CopyMaskToHost(std::vector<uint8_t>* mask) {
  if (!has_forward()) {
    return absl::FailedPreconditionError("Dropout mask: no Forward has run");
  }
  mask->resize(num_elements_);
  return device_->CopyToHost(mask_.data(), mask_.bytes(), mask->data());
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
