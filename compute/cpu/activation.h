// Keras's activations other than ReLU and last-axis softmax (relu.h,
// softmax.h run those on oneDNN): forward and backward over an
// ActivationShape, in plain loops over float32.
//
//   ActivationShape shape = plan.activation;
//   shape.outer *= batch;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ActivationOp> op,
//                            ActivationOp::Create(shape));
//   PSTRAIN_RETURN_IF_ERROR(op->Forward(x, y));
//   PSTRAIN_RETURN_IF_ERROR(op->Backward(x, y, dy, dx));
//
// The formulas are Keras 3's (keras/src/activations), each derivative the
// exact one of its forward: gelu is x * Phi(x) with Phi the normal CDF, its
// tanh approximation 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
// selu's constants those of Klambauer et al. (as Keras), softmax and
// log_softmax stable (the maximum subtracted). At a kink (ReLU's threshold,
// hard_sigmoid's ends) the derivative is that of the side below.
#ifndef PSTRAIN_COMPUTE_CPU_ACTIVATION_H_
#define PSTRAIN_COMPUTE_CPU_ACTIVATION_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {
namespace cpu {

class ActivationOp {
 public:
  // INVALID_ARGUMENT for an empty shape, or kLinear / kRelu (no op needed:
  // the identity, relu.h).
  static absl::StatusOr<std::unique_ptr<ActivationOp>> Create(
      const ActivationShape& shape);

  int64_t num_elements() const { return n_; }

  // y = f(x) over the whole shape.
  absl::Status Forward(const float* x, float* y) const;
  // dx = dy * f'(x), from Forward's x and y; dx may be dy.
  absl::Status Backward(const float* x, const float* y, const float* dy,
                        float* dx) const;

 private:
  explicit ActivationOp(const ActivationShape& shape)
      : shape_(shape), n_(shape.outer * shape.axis * shape.inner) {}

  const ActivationShape shape_;
  const int64_t n_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_ACTIVATION_H_
