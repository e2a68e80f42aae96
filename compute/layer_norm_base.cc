#include "compute/layer_norm_base.h"

#include "compute/norm_checks.h"

namespace pstrain {
namespace worker {

absl::Status LayerNormBase::CheckEpsilon(const LayerNormShape& shape) {
  return CheckNormEpsilon("LayerNorm", shape.epsilon);
}

absl::Status LayerNormBase::Forward(const float* x, const float* gamma,
                                    const float* beta, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "LayerNorm forward: x and y are required");
  }
  absl::Status status = CheckNormParams("LayerNorm forward", gamma, beta,
                                        shape_.scale, shape_.center);
  if (!status.ok()) return status;
  status = RunForward(x, gamma, beta, y);
  has_forward_ = status.ok();
  return status;
}

absl::Status LayerNormBase::Backward(const float* x, const float* gamma,
                                     const float* dy, float* dx, float* dgamma,
                                     float* dbeta) {
  const absl::Status status = CheckNormBackward(
      "LayerNorm", x, gamma, dy, dgamma, dbeta, shape_.scale, shape_.center);
  if (!status.ok()) return status;
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "LayerNorm backward: no Forward has run");
  }
  return RunBackward(x, gamma, dy, dx, dgamma, dbeta);
}

}  // namespace worker
}  // namespace pstrain
