#include "compute/gpu/l2.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<double> AddL2Regularization(const float* w, int64_t n, float l2,
                                           float* dw, Device* device) {
  if (device == nullptr) {
    return absl::InvalidArgumentError("L2: device is required");
  }
  if (n <= 0) return 0.0;
  if (w == nullptr) return absl::InvalidArgumentError("L2: w is required");
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  cublasHandle_t handle = device->cublas();
  float sum_squares = 0.0f;
  // Host pointer mode (the handle's default): cublasSdot waits for its
  // result.
  PSTRAIN_RETURN_IF_ERROR(CublasStatus(
      cublasSdot_64(handle, n, w, 1, w, 1, &sum_squares), "L2: cublasSdot"));
  if (dw != nullptr) {
    const float twice_l2 = 2.0f * l2;
    PSTRAIN_RETURN_IF_ERROR(CublasStatus(
        cublasSaxpy_64(handle, n, &twice_l2, w, 1, dw, 1), "L2: cublasSaxpy"));
    // Surface errors of the asynchronous axpy here, not in a later call.
    PSTRAIN_RETURN_IF_ERROR(device->Synchronize());
  }
  return static_cast<double>(l2) * sum_squares;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
