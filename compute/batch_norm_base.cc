#include "compute/batch_norm_base.h"

#include "compute/norm_checks.h"

namespace pstrain {
namespace worker {

absl::Status BatchNormBase::CheckEpsilon(const BatchNormShape& shape) {
  return CheckNormEpsilon("BatchNorm", shape.epsilon);
}

absl::Status BatchNormBase::ForwardTraining(const float* x, const float* gamma,
                                            const float* beta, float* y,
                                            float* batch_mean,
                                            float* batch_var) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "BatchNorm forward (training): x and y are required");
  }
  absl::Status status = CheckNormParams("BatchNorm forward (training)", gamma,
                                        beta, shape_.scale, shape_.center);
  if (!status.ok()) return status;
  has_forward_ = false;
  Buffers b;
  b.x = x;
  b.gamma = gamma;
  b.beta = beta;
  b.y = y;
  b.batch_mean = batch_mean;
  b.batch_var = batch_var;
  status = RunForwardTraining(b);
  has_forward_ = status.ok();
  return status;
}

absl::Status BatchNormBase::ForwardInference(const float* x, const float* gamma,
                                             const float* beta,
                                             const float* moving_mean,
                                             const float* moving_var,
                                             float* y) {
  if (x == nullptr || y == nullptr || moving_mean == nullptr ||
      moving_var == nullptr) {
    return absl::InvalidArgumentError(
        "BatchNorm forward (inference): x, moving_mean, moving_var and y are "
        "required");
  }
  const absl::Status status =
      CheckNormParams("BatchNorm forward (inference)", gamma, beta,
                      shape_.scale, shape_.center);
  if (!status.ok()) return status;
  Buffers b;
  b.x = x;
  b.gamma = gamma;
  b.beta = beta;
  b.moving_mean = moving_mean;
  b.moving_var = moving_var;
  b.y = y;
  return RunForwardInference(b);
}

absl::Status BatchNormBase::Backward(const float* x, const float* gamma,
                                     const float* dy, float* dx, float* dgamma,
                                     float* dbeta) {
  const absl::Status status = CheckNormBackward(
      "BatchNorm", x, gamma, dy, dgamma, dbeta, shape_.scale, shape_.center);
  if (!status.ok()) return status;
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "BatchNorm backward: no training Forward has run");
  }
  Buffers b;
  b.x = x;
  b.gamma = gamma;
  b.dy = dy;
  b.dx = dx;
  b.dgamma = dgamma;
  b.dbeta = dbeta;
  return RunBackward(b);
}

}  // namespace worker
}  // namespace pstrain
