// Softmax over the last axis of [N, classes] on cuDNN, forward and backward:
// the twin of compute/cpu/softmax.h, on device pointers.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SoftmaxOp> softmax,
//                            SoftmaxOp::Create({batch, 10}, device));
//   PSTRAIN_RETURN_IF_ERROR(softmax->Forward(logits, probs));
//   ... dprobs from Losses::SparseCrossEntropyFromProbabilities ...
//   PSTRAIN_RETURN_IF_ERROR(softmax->Backward(probs, dprobs, dlogits));
//
// The matrix is the NCHW tensor [N, classes, 1, 1] and cuDNN's
// CUDNN_SOFTMAX_ACCURATE / CUDNN_SOFTMAX_MODE_INSTANCE (max subtracted
// first). Work is enqueued on the device's stream. Not thread-safe; see
// Device.
#ifndef PSTRAIN_COMPUTE_GPU_SOFTMAX_H_
#define PSTRAIN_COMPUTE_GPU_SOFTMAX_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/gpu/cudnn_util.h"
#include "compute/gpu/device.h"
#include "compute/output_backward_base.h"

namespace pstrain {
namespace worker {
namespace gpu {

using ::pstrain::worker::cpu::SoftmaxShape;

// Forward, Backward and their checks are OutputBackwardBase's
// (compute/output_backward_base.h); this is the cuDNN half.
class SoftmaxOp : public OutputBackwardBase {
 public:
  // INVALID_ARGUMENT for a non-positive size or a null device.
  static absl::StatusOr<std::unique_ptr<SoftmaxOp>> Create(
      const SoftmaxShape& shape, Device* device);

  const SoftmaxShape& shape() const { return shape_; }

 private:
  SoftmaxOp(const SoftmaxShape& shape, Device* device)
      : OutputBackwardBase("Softmax"), shape_(shape), device_(device) {}

  absl::Status RunForward(const float* x, float* y) override;
  absl::Status RunBackward(const float* y, const float* dy, float* dx) override;

  const SoftmaxShape shape_;
  Device* const device_;
  TensorDescriptor desc_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_SOFTMAX_H_
