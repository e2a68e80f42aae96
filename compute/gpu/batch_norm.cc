#include "compute/gpu/batch_norm.h"

#include <algorithm>

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
  PSTRAIN_RETURN_IF_ERROR(CheckEpsilon(shape));
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

absl::Status BatchNormOp::RunForwardTraining(const Buffers& b) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const BatchNormShape& s = shape_;
  cudaStream_t stream = device_->stream();
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchBatchNormStatistics(b.x, s.rows, s.channels, scratch_.as<double>(),
                                mean_.floats(), variance_.floats(), stream),
      "BatchNorm forward (training): statistics"));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(LaunchBatchNormForward(b.x, s.rows, s.channels, mean_.floats(),
                                        variance_.floats(), s.epsilon, b.gamma,
                                        b.beta, b.y, stream),
                 "BatchNorm forward (training): normalize"));
  const size_t bytes = s.channels * sizeof(float);
  if (b.batch_mean != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(b.batch_mean, mean_.data(), bytes,
                                   cudaMemcpyDeviceToDevice, stream),
                   "BatchNorm forward (training): copy batch_mean"));
  }
  if (b.batch_var != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(b.batch_var, variance_.data(), bytes,
                                   cudaMemcpyDeviceToDevice, stream),
                   "BatchNorm forward (training): copy batch_var"));
  }
  return absl::OkStatus();
}

absl::Status BatchNormOp::RunForwardInference(const Buffers& b) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchBatchNormForward(b.x, shape_.rows, shape_.channels, b.moving_mean,
                             b.moving_var, shape_.epsilon, b.gamma, b.beta, b.y,
                             device_->stream()),
      "BatchNorm forward (inference): normalize");
}

absl::Status BatchNormOp::RunBackward(const Buffers& b) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchBatchNormBackward(b.x, b.dy, shape_.rows, shape_.channels,
                              mean_.floats(), variance_.floats(),
                              shape_.epsilon, b.gamma, scratch_.as<double>(),
                              b.dx, b.dgamma, b.dbeta, device_->stream()),
      "BatchNorm backward");
}

absl::Status BatchNormOp::ScaledStatistics(float scale, float* mean_out,
                                           float* var_out) {
  if (!has_forward()) {
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
