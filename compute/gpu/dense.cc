#include "compute/gpu/dense.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/kernels.h"
#include "compute/gpu/shape_check.h"
#include "compute/weighted_op_checks.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr char kOp[] = "Dense";
// cuBLAS's alpha and beta.
constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

absl::StatusOr<std::unique_ptr<DenseOp>> DenseOp::Create(
    const DenseShape& shape, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(CheckDims(
      kOp, {{"batch", shape.batch}, {"in", shape.in}, {"out", shape.out}}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "x", {shape.batch, shape.in}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "y", {shape.batch, shape.out}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "w", {shape.in, shape.out}));
  PSTRAIN_RETURN_IF_ERROR(CheckDevice(kOp, device));
  return std::unique_ptr<DenseOp>(new DenseOp(shape, device));
}

absl::Status DenseOp::Forward(const float* x, const float* w, const float* b,
                              float* y) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckWeightedForward(kOp, x, w, b, y, shape_.use_bias));
  const int n = static_cast<int>(shape_.batch);
  const int in = static_cast<int>(shape_.in);
  const int out = static_cast<int>(shape_.out);
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  // y^T [out, N] = w^T [out, in] * x^T [in, N].
  PSTRAIN_RETURN_IF_ERROR(
      CublasStatus(cublasSgemm(device_->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, out,
                               n, in, &kOne, w, out, x, in, &kZero, y, out),
                   "Dense forward: cublasSgemm"));
  if (!shape_.use_bias) return absl::OkStatus();
  return CudaStatus(
      LaunchBiasAdd(b, shape_.batch, shape_.out, y, device_->stream()),
      "Dense forward: bias add");
}

absl::Status DenseOp::Backward(const float* x, const float* w, const float* dy,
                               float* dx, float* dw, float* db) {
  PSTRAIN_RETURN_IF_ERROR(CheckWeightedBackward(
      kOp, x, w, dy, dx, dw, db, shape_.compute_dx, shape_.use_bias));
  const int n = static_cast<int>(shape_.batch);
  const int in = static_cast<int>(shape_.in);
  const int out = static_cast<int>(shape_.out);
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  if (shape_.compute_dx) {
    // dx^T [in, N] = (w^T)^T [in, out] * dy^T [out, N].
    PSTRAIN_RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(device_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, in, n, out,
                    &kOne, w, out, dy, out, &kZero, dx, in),
        "Dense backward: cublasSgemm for dx"));
  }
  // dw^T [out, in] = dy^T [out, N] * (x^T)^T [N, in].
  PSTRAIN_RETURN_IF_ERROR(
      CublasStatus(cublasSgemm(device_->cublas(), CUBLAS_OP_N, CUBLAS_OP_T, out,
                               in, n, &kOne, dy, out, x, in, &kZero, dw, out),
                   "Dense backward: cublasSgemm for dw"));
  if (!shape_.use_bias) return absl::OkStatus();
  return CudaStatus(
      LaunchBiasGrad(dy, shape_.batch, shape_.out, db, device_->stream()),
      "Dense backward: bias gradient");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
