// What the CPU and GPU ReLU and Softmax ops (cpu/relu.h, gpu/relu.h,
// cpu/softmax.h, gpu/softmax.h) share: ops whose Backward reads Forward's
// output y rather than its input, so a caller may run Forward in place and
// keep only y. The base holds the public Forward/Backward pair and checks
// each call's buffers, naming the op; a device op derives from it and
// implements RunForward and RunBackward, called only once the buffers have
// passed the checks.
//
//   class ReluOp : public OutputBackwardBase {
//     ...
//     ReluOp(...) : OutputBackwardBase("ReLU"), ... {}
//     absl::Status RunForward(const float* x, float* y) override;
//     absl::Status RunBackward(const float* y, const float* dy,
//                              float* dx) override;
//   };
//   PSTRAIN_RETURN_IF_ERROR(relu->Forward(z, y));
//   PSTRAIN_RETURN_IF_ERROR(relu->Backward(y, dy, dz));
#ifndef PSTRAIN_COMPUTE_OUTPUT_BACKWARD_BASE_H_
#define PSTRAIN_COMPUTE_OUTPUT_BACKWARD_BASE_H_

#include "absl/status/status.h"

namespace pstrain {
namespace worker {

class OutputBackwardBase {
 public:
  virtual ~OutputBackwardBase() = default;

  OutputBackwardBase(const OutputBackwardBase&) = delete;
  OutputBackwardBase& operator=(const OutputBackwardBase&) = delete;

  // y = f(x). INVALID_ARGUMENT when x or y is null.
  absl::Status Forward(const float* x, float* y);

  // dx = dL/dx from dy = dL/dy and Forward's output y. INVALID_ARGUMENT when
  // y, dy or dx is null.
  absl::Status Backward(const float* y, const float* dy, float* dx);

 protected:
  // `op` names the op in errors ("ReLU"); it must outlive this object (a
  // string literal).
  explicit OutputBackwardBase(const char* op) : op_(op) {}

  // The device's work of Forward and Backward, the buffers checked.
  virtual absl::Status RunForward(const float* x, float* y) = 0;
  virtual absl::Status RunBackward(const float* y, const float* dy,
                                   float* dx) = 0;

 private:
  const char* const op_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_OUTPUT_BACKWARD_BASE_H_
