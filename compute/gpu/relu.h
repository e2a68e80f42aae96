// ReLU forward and backward on the GPU (pstrain kernels), over any activation
// viewed as a flat array of float32: the twin of compute/cpu/relu.h.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ReluOp> relu,
//                            ReluOp::Create(batch * 128, device));
//   PSTRAIN_RETURN_IF_ERROR(relu->Forward(z, y));       // y = max(z, 0)
//   PSTRAIN_RETURN_IF_ERROR(relu->Backward(y, dy, dz));  // dz = dy * (y > 0)
//
// Backward reads the forward output y, not its input, so a caller may run
// Forward in place (z == y) and keep only y. Results equal the CPU's exactly.
// Work is enqueued on the device's stream. Not thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_RELU_H_
#define PSTRAIN_COMPUTE_GPU_RELU_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/gpu/device.h"
#include "compute/output_backward_base.h"

namespace pstrain {
namespace worker {
namespace gpu {

// Forward, Backward and their checks are OutputBackwardBase's
// (compute/output_backward_base.h); this is the CUDA half.
class ReluOp : public OutputBackwardBase {
 public:
  // INVALID_ARGUMENT unless num_elements > 0 and device is not null.
  static absl::StatusOr<std::unique_ptr<ReluOp>> Create(int64_t num_elements,
                                                        Device* device);

  int64_t num_elements() const { return num_elements_; }

 private:
  ReluOp(int64_t num_elements, Device* device)
      : OutputBackwardBase("ReLU"),
        num_elements_(num_elements),
        device_(device) {}

  // y = max(x, 0), x == y allowed; dx = dy where y > 0, else 0, dy == dx
  // allowed.
  absl::Status RunForward(const float* x, float* y) override;
  absl::Status RunBackward(const float* y, const float* dy, float* dx) override;

  const int64_t num_elements_;
  Device* const device_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_RELU_H_
