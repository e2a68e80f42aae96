#include "compute/gpu/l2.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/kernels.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<double> AddRegularization(const float* w, int64_t n,
                                         const Regularizer& r,
                                         double gradient_scale, float* dw,
                                         Device* device) {
  if (device == nullptr) {
    return absl::InvalidArgumentError("Regularizer: device is required");
  }
  if (n <= 0) return 0.0;
  if (w == nullptr) {
    return absl::InvalidArgumentError("Regularizer: w is required");
  }
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  cublasHandle_t handle = device->cublas();
  // Host pointer mode (the handle's default): cublasSdot and cublasSasum
  // wait for their results.
  double penalty = 0;
  if (r.l2 != 0) {
    float sum_squares = 0.0f;
    PSTRAIN_RETURN_IF_ERROR(
        CublasStatus(cublasSdot_64(handle, n, w, 1, w, 1, &sum_squares),
                     "Regularizer: cublasSdot"));
    penalty += double{r.l2} * sum_squares;
  }
  if (r.l1 != 0) {
    float sum_abs = 0.0f;
    PSTRAIN_RETURN_IF_ERROR(CublasStatus(
        cublasSasum_64(handle, n, w, 1, &sum_abs), "Regularizer: cublasSasum"));
    penalty += double{r.l1} * sum_abs;
  }
  if (dw == nullptr) return penalty;
  if (r.l2 != 0) {
    const float twice_l2 = static_cast<float>(gradient_scale * 2.0 * r.l2);
    PSTRAIN_RETURN_IF_ERROR(
        CublasStatus(cublasSaxpy_64(handle, n, &twice_l2, w, 1, dw, 1),
                     "Regularizer: cublasSaxpy"));
  }
  if (r.l1 != 0) {
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(
        LaunchAddScaledSign(w, n, static_cast<float>(gradient_scale * r.l1), dw,
                            device->stream()),
        "Regularizer: add l1 * sign(w)"));
  }
  // Surface errors of the asynchronous updates here, not in a later call.
  PSTRAIN_RETURN_IF_ERROR(device->Synchronize());
  return penalty;
}

absl::StatusOr<double> AddL2Regularization(const float* w, int64_t n, float l2,
                                           float* dw, Device* device) {
  Regularizer r;
  r.l2 = l2;
  return AddRegularization(w, n, r, /*gradient_scale=*/1.0, dw, device);
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
