#include "compute/gpu/layer_norm.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/norm_attention_kernels.h"
#include "compute/gpu/shape_check.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr char kOp[] = "LayerNorm";

}  // namespace

absl::StatusOr<std::unique_ptr<LayerNormOp>> LayerNormOp::Create(
    const LayerNormShape& shape, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckDims(kOp, {{"rows", shape.rows}, {"width", shape.width}}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "x", {shape.rows, shape.width}));
  PSTRAIN_RETURN_IF_ERROR(CheckEpsilon(shape));
  PSTRAIN_RETURN_IF_ERROR(CheckDevice(kOp, device));
  std::unique_ptr<LayerNormOp> op(new LayerNormOp(shape, device));
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  PSTRAIN_ASSIGN_OR_RETURN(op->mean_,
                           device->Allocate(shape.rows * sizeof(float)));
  PSTRAIN_ASSIGN_OR_RETURN(op->variance_,
                           device->Allocate(shape.rows * sizeof(float)));
  PSTRAIN_ASSIGN_OR_RETURN(
      op->scratch_,
      device->Allocate(ColumnSumScratch(shape.rows, 2 * shape.width) *
                       sizeof(double)));
  return op;
}

absl::Status LayerNormOp::RunForward(const float* x, const float* gamma,
                                     const float* beta, float* y) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(
      LaunchLayerNormForward(x, shape_.rows, shape_.width, shape_.epsilon,
                             gamma, beta, y, mean_.floats(), variance_.floats(),
                             device_->stream()),
      "LayerNorm forward");
}

absl::Status LayerNormOp::RunBackward(const float* x, const float* gamma,
                                      const float* dy, float* dx, float* dgamma,
                                      float* dbeta) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const LayerNormShape& s = shape_;
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchLayerNormBackwardParams(
          x, dy, s.rows, s.width, mean_.floats(), variance_.floats(), s.epsilon,
          scratch_.as<double>(), dgamma, dbeta, device_->stream()),
      "LayerNorm backward: dgamma and dbeta"));
  if (dx == nullptr) return absl::OkStatus();
  return CudaStatus(
      LaunchLayerNormBackwardData(x, dy, s.rows, s.width, mean_.floats(),
                                  variance_.floats(), s.epsilon, gamma, dx,
                                  device_->stream()),
      "LayerNorm backward: dx");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
