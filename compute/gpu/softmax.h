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

namespace pstrain {
namespace worker {
namespace gpu {

using ::pstrain::worker::cpu::SoftmaxShape;

class SoftmaxOp {
 public:
  // INVALID_ARGUMENT for a non-positive size or a null device.
  static absl::StatusOr<std::unique_ptr<SoftmaxOp>> Create(
      const SoftmaxShape& shape, Device* device);

  SoftmaxOp(const SoftmaxOp&) = delete;
  SoftmaxOp& operator=(const SoftmaxOp&) = delete;

  const SoftmaxShape& shape() const { return shape_; }

  // y[i, :] = softmax(x[i, :]); both [N, classes].
  absl::Status Forward(const float* x, float* y);

  // dx = y * (dy - sum(dy * y)) per row, from Forward's output y.
  absl::Status Backward(const float* y, const float* dy, float* dx);

 private:
  SoftmaxOp(const SoftmaxShape& shape, Device* device)
      : shape_(shape), device_(device) {}

  const SoftmaxShape shape_;
  Device* const device_;
  TensorDescriptor desc_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_SOFTMAX_H_
