#include "compute/gpu/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/norm_attention_kernels.h"
#include "compute/gpu/shape_check.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr char kOp[] = "BatchNorm";

}  // namespace

absl::StatusOr<std::unique_ptr<BatchNormOp>> BatchNormOp::Create(
    const BatchNormShape& shape, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckDims(kOp, {{"rows", shape.rows}, {"channels", shape.channels}}));
  PSTRAIN_RETURN_IF_ERROR(
      CheckElements(kOp, "x", {shape.rows, shape.channels}));
  if (!(shape.epsilon >= 0) || !std::isfinite(shape.epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchNorm: epsilon must be finite and non-negative, got ",
                     shape.epsilon));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckDevice(kOp, device));
  std::unique_ptr<BatchNormOp> op(new BatchNormOp(shape, device));
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  const int64_t c = shape.channels;
  const int64_t scratch = std::max(ColumnSumScratch(shape.rows, c) + c,
                                   ColumnSumScratch(shape.rows, 2 * c) + 2 * c);
  PSTRAIN_ASSIGN_OR_RETURN(op->mean_, device->Allocate(c * sizeof(float)));
  PSTRAIN_ASSIGN_OR_RETURN(op->variance_, device->Allocate(c * sizeof(float)));
  PSTRAIN_ASSIGN_OR_RETURN(op->scratch_,
                           device->Allocate(scratch * sizeof(double)));
  return op;
}

absl::Status BatchNormOp::CheckParams(const char* what, const float* gamma,
                                      const float* beta) const {
  if ((gamma != nullptr) != shape_.scale ||
      (beta != nullptr) != shape_.center) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchNorm ", what,
                     ": gamma must be given iff scale, beta iff center"));
  }
  return absl::OkStatus();
}

absl::Status BatchNormOp::ForwardTraining(const float* x, const float* gamma,
                                          const float* beta, float* y,
                                          float* batch_mean, float* batch_var) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "BatchNorm forward (training): x and y are required");
  }
  PSTRAIN_RETURN_IF_ERROR(CheckParams("forward (training)", gamma, beta));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  has_forward_ = false;
  const BatchNormShape& s = shape_;
  cudaStream_t stream = device_->stream();
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchBatchNormStatistics(x, s.rows, s.channels, scratch_.as<double>(),
                                mean_.floats(), variance_.floats(), stream),
      "BatchNorm forward (training): statistics"));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(LaunchBatchNormForward(x, s.rows, s.channels, mean_.floats(),
                                        variance_.floats(), s.epsilon, gamma,
                                        beta, y, stream),
                 "BatchNorm forward (training): normalize"));
  const size_t bytes = s.channels * sizeof(float);
  if (batch_mean != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(batch_mean, mean_.data(), bytes,
                                   cudaMemcpyDeviceToDevice, stream),
                   "BatchNorm forward (training): copy batch_mean"));
  }
  if (batch_var != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(batch_var, variance_.data(), bytes,
                                   cudaMemcpyDeviceToDevice, stream),
                   "BatchNorm forward (training): copy batch_var"));
  }
  has_forward_ = true;
  return absl::OkStatus();
}

absl::Status BatchNormOp::ForwardInference(const float* x, const float* gamma,
                                           const float* beta,
                                           const float* moving_mean,
                                           const float* moving_var, float* y) {
  if (x == nullptr || y == nullptr || moving_mean == nullptr ||
      moving_var == nullptr) {
    return absl::InvalidArgumentError(
        "BatchNorm forward (inference): x, moving_mean, moving_var and y are "
        "required");
  }
  PSTRAIN_RETURN_IF_ERROR(CheckParams("forward (inference)", gamma, beta));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchBatchNormForward(x, shape_.rows, shape_.channels, moving_mean,
                             moving_var, shape_.epsilon, gamma, beta, y,
                             device_->stream()),
      "BatchNorm forward (inference): normalize");
}

absl::Status BatchNormOp::Backward(const float* x, const float* gamma,
                                   const float* dy, float* dx, float* dgamma,
                                   float* dbeta) {
  if (x == nullptr || dy == nullptr) {
    return absl::InvalidArgumentError(
        "BatchNorm backward: x and dy are required");
  }
  if ((gamma != nullptr) != shape_.scale ||
      (dgamma != nullptr) != shape_.scale ||
      (dbeta != nullptr) != shape_.center) {
    return absl::InvalidArgumentError(
        "BatchNorm backward: gamma and dgamma must be given iff scale, dbeta "
        "iff center");
  }
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "BatchNorm backward: no training Forward has run");
  }
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchBatchNormBackward(x, dy, shape_.rows, shape_.channels,
                              mean_.floats(), variance_.floats(),
                              shape_.epsilon, gamma, scratch_.as<double>(), dx,
                              dgamma, dbeta, device_->stream()),
      "BatchNorm backward");
}

absl::Status BatchNormOp::ScaledStatistics(float scale, float* mean_out,
                                           float* var_out) {
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "BatchNorm scaled statistics: no training Forward has run");
  }
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  if (mean_out != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        CudaStatus(LaunchScale(mean_.floats(), shape_.channels, scale, mean_out,
                               device_->stream()),
                   "BatchNorm scaled statistics: mean"));
  }
  if (var_out == nullptr) return absl::OkStatus();
  return CudaStatus(LaunchScale(variance_.floats(), shape_.channels, scale,
                                var_out, device_->stream()),
                    "BatchNorm scaled statistics: variance");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
