// What the CPU and GPU LayerNormalization ops (cpu/layer_norm.h,
// gpu/layer_norm.h) share: the public Forward/Backward contract, the checks
// of every call's buffers and of the shape's epsilon, and the record of
// whether a Forward has run (Backward needs its per-row statistics). A
// device op derives from LayerNormBase and implements the Run* hooks, which
// are called only once the buffers have passed the checks; callers use the
// public methods (see cpu/layer_norm.h for the formulas and an example).
#ifndef PSTRAIN_COMPUTE_LAYER_NORM_BASE_H_
#define PSTRAIN_COMPUTE_LAYER_NORM_BASE_H_

#include "absl/status/status.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {

using ::pstrain::worker::cpu::LayerNormShape;

class LayerNormBase {
 public:
  virtual ~LayerNormBase() = default;

  LayerNormBase(const LayerNormBase&) = delete;
  LayerNormBase& operator=(const LayerNormBase&) = delete;

  const LayerNormShape& shape() const { return shape_; }

  // y = gamma * xhat + beta, x and y [rows, width]; gamma [width] is null
  // iff !scale, beta [width] null iff !center. Records each row's mean and
  // variance for Backward.
  absl::Status Forward(const float* x, const float* gamma, const float* beta,
                       float* y);

  // From dy = dL/dy, overwrites dx [rows, width] (may be null: not
  // computed), dgamma [width] (null iff !scale) and dbeta [width] (null iff
  // !center). x must be the last Forward's input; gamma is null iff !scale.
  // FAILED_PRECONDITION before any Forward.
  absl::Status Backward(const float* x, const float* gamma, const float* dy,
                        float* dx, float* dgamma, float* dbeta);

 protected:
  explicit LayerNormBase(const LayerNormShape& shape) : shape_(shape) {}

  // INVALID_ARGUMENT naming LayerNorm unless shape.epsilon is finite and
  // non-negative (the sizes' limits are the device's).
  static absl::Status CheckEpsilon(const LayerNormShape& shape);

  // The device's work of the public method of the same name, its buffers
  // checked.
  virtual absl::Status RunForward(const float* x, const float* gamma,
                                  const float* beta, float* y) = 0;
  virtual absl::Status RunBackward(const float* x, const float* gamma,
                                   const float* dy, float* dx, float* dgamma,
                                   float* dbeta) = 0;

  const LayerNormShape shape_;

 private:
  bool has_forward_ = false;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_LAYER_NORM_BASE_H_
