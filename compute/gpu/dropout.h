// Keras Dropout in training on the GPU: the twin of compute/cpu/dropout.h,
// drawing the SAME mask for the same DropoutKey (seed, step, offset): element
// i keeps its value iff word (e mod 4) of Philox4x32(counter = {lo(e / 4),
// hi(e / 4), lo(step), hi(step)}, key = {lo(seed), hi(seed)}) is >=
// round(rate * 2^32), e = offset + i, and is then scaled by 1 / (1 - rate).
// The Philox rounds are kernel_math.h's copy of compute/cpu/philox.h (checked
// equal by kernel_math_test), so CPU and GPU workers, and any split of a
// batch between them, give identical masks.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DropoutOp> dropout,
//       DropoutOp::Create(batch * 128, /*rate=*/0.5f, device));
//   PSTRAIN_RETURN_IF_ERROR(dropout->Forward(x, key, y));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(dropout->Backward(dy, dx));
//
// The mask lives on the device (one byte per element, allocated once). In
// inference Keras's Dropout is the identity: do not call Forward then. Work
// is enqueued on the device's stream. Not thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_DROPOUT_H_
#define PSTRAIN_COMPUTE_GPU_DROPOUT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/dropout_base.h"
#include "compute/gpu/device.h"

namespace pstrain {
namespace worker {
namespace gpu {

// The public methods, their checks and their contract are DropoutBase's
// (compute/dropout_base.h); this draws the mask on the device.
class DropoutOp : public DropoutBase {
 public:
  // INVALID_ARGUMENT unless num_elements > 0, 0 <= rate < 1 and device is not
  // null.
  static absl::StatusOr<std::unique_ptr<DropoutOp>> Create(int64_t num_elements,
                                                           float rate,
                                                           Device* device);

  // Copies the last Forward's mask (1 kept, 0 dropped) to the host, waiting
  // for the stream (for tests). FAILED_PRECONDITION before any Forward.
  absl::Status CopyMaskToHost(std::vector<uint8_t>* mask);

 private:
  DropoutOp(int64_t num_elements, float rate, Device* device)
      : DropoutBase(num_elements, rate), device_(device) {}

  absl::Status RunForward(const float* x, const DropoutKey& key,
                          float* y) override;
  absl::Status RunBackward(const float* dy, float* dx) override;

  Device* const device_;
  DeviceBuffer mask_;  // uint8 [num_elements]
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_DROPOUT_H_
