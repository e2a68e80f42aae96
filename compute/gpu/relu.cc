#include "compute/gpu/relu.h"

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/kernels.h"
#include "compute/gpu/shape_check.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<std::unique_ptr<ReluOp>> ReluOp::Create(int64_t num_elements,
                                                       Device* device) {
  if (num_elements <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReLU: num_elements must be positive, got ", num_elements));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckDevice("ReLU", device));
  return std::unique_ptr<ReluOp>(new ReluOp(num_elements, device));
}

absl::Status ReluOp::RunForward(const float* x, float* y) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(LaunchReluForward(x, num_elements_, y, device_->stream()),
                    "ReLU forward");
}

absl::Status ReluOp::RunBackward(const float* y, const float* dy, float* dx) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchReluBackward(y, dy, num_elements_, dx, device_->stream()),
      "ReLU backward");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
