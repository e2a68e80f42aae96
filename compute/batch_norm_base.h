// What the CPU and GPU BatchNormalization ops (cpu/batch_norm.h,
// gpu/batch_norm.h) share: the public Forward/Backward contract, the checks
// of every call's buffers and of the shape's epsilon, and the record of
// whether a training Forward has run (Backward needs its statistics). A
// device op derives from BatchNormBase and implements the Run* hooks, which
// are called only once the buffers have passed the checks; callers use the
// public methods (see cpu/batch_norm.h for the formulas and an example).
#ifndef PSTRAIN_COMPUTE_BATCH_NORM_BASE_H_
#define PSTRAIN_COMPUTE_BATCH_NORM_BASE_H_

#include "absl/status/status.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {

using ::pstrain::worker::cpu::BatchNormShape;

class BatchNormBase {
 public:
  virtual ~BatchNormBase() = default;

  BatchNormBase(const BatchNormBase&) = delete;
  BatchNormBase& operator=(const BatchNormBase&) = delete;

  const BatchNormShape& shape() const { return shape_; }

  // Training: y [rows, channels] normalized with x's own statistics, which
  // are written to batch_mean and batch_var ([channels] each; either may be
  // null if not wanted) and kept for Backward. gamma [channels] is null iff
  // !scale, beta [channels] null iff !center.
  absl::Status ForwardTraining(const float* x, const float* gamma,
                               const float* beta, float* y, float* batch_mean,
                               float* batch_var);

  // Inference: y normalized with the given moving_mean and moving_var
  // ([channels] each, required). Leaves the kept statistics alone.
  absl::Status ForwardInference(const float* x, const float* gamma,
                                const float* beta, const float* moving_mean,
                                const float* moving_var, float* y);

  // The gradient of the last ForwardTraining, whose x this must be, from
  // dy = dL/dy: overwrites dx [rows, channels] (may be null: not computed),
  // dgamma (null iff !scale) and dbeta (null iff !center). gamma is null iff
  // !scale. FAILED_PRECONDITION before any ForwardTraining.
  absl::Status Backward(const float* x, const float* gamma, const float* dy,
                        float* dx, float* dgamma, float* dbeta);

 protected:
  explicit BatchNormBase(const BatchNormShape& shape) : shape_(shape) {}

  // INVALID_ARGUMENT naming BatchNorm unless shape.epsilon is finite and
  // non-negative (the sizes' limits are the device's).
  static absl::Status CheckEpsilon(const BatchNormShape& shape);

  // Whether the last ForwardTraining succeeded.
  bool has_forward() const { return has_forward_; }

  // One call's buffers as the public method received them, checked: null
  // only where that method allows it, and unused members null.
  struct Buffers {
    const float* x = nullptr;
    const float* gamma = nullptr;
    const float* beta = nullptr;
    float* y = nullptr;
    float* batch_mean = nullptr;  // ForwardTraining's outputs.
    float* batch_var = nullptr;
    const float* moving_mean = nullptr;  // ForwardInference's statistics.
    const float* moving_var = nullptr;
    const float* dy = nullptr;  // Backward's.
    float* dx = nullptr;
    float* dgamma = nullptr;
    float* dbeta = nullptr;
  };

  // The device's work of the public method of the same name.
  virtual absl::Status RunForwardTraining(const Buffers& b) = 0;
  virtual absl::Status RunForwardInference(const Buffers& b) = 0;
  virtual absl::Status RunBackward(const Buffers& b) = 0;

  const BatchNormShape shape_;

 private:
  bool has_forward_ = false;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_BATCH_NORM_BASE_H_
