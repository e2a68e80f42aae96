#include "compute/gpu/layer_norm.h"

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

constexpr char kOp[] = "LayerNorm";

}  // namespace

absl::StatusOr<std::unique_ptr<LayerNormOp>> LayerNormOp::Create(
    const LayerNormShape& shape, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckDims(kOp, {{"rows", shape.rows}, {"width", shape.width}}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "x", {shape.rows, shape.width}));
  if (!(shape.epsilon >= 0) || !std::isfinite(shape.epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LayerNorm: epsilon must be finite and non-negative, got ",
                     shape.epsilon));
  }
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

absl::Status LayerNormOp::Forward(const float* x, const float* gamma,
                                  const float* beta, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "LayerNorm forward: x and y are required");
  }
  if ((gamma != nullptr) != shape_.scale ||
      (beta != nullptr) != shape_.center) {
    return absl::InvalidArgumentError(
        "LayerNorm forward: gamma must be given iff scale, beta iff center");
  }
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const absl::Status status =
      CudaStatus(LaunchLayerNormForward(
                     x, shape_.rows, shape_.width, shape_.epsilon, gamma, beta,
                     y, mean_.floats(), variance_.floats(), device_->stream()),
                 "LayerNorm forward");
  has_forward_ = status.ok();
  return status;
}

absl::Status LayerNormOp::Backward(const float* x, const float* gamma,
                                   const float* dy, float* dx, float* dgamma,
                                   float* dbeta) {
  if (x == nullptr || dy == nullptr) {
    return absl::InvalidArgumentError(
        "LayerNorm backward: x and dy are required");
  }
  if ((gamma != nullptr) != shape_.scale ||
      (dgamma != nullptr) != shape_.scale ||
      (dbeta != nullptr) != shape_.center) {
    return absl::InvalidArgumentError(
        "LayerNorm backward: gamma and dgamma must be given iff scale, dbeta "
        "iff center");
  }
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "LayerNorm backward: no Forward has run");
  }
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
