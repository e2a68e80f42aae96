// What the CPU and GPU Dropout ops (cpu/dropout.h, gpu/dropout.h) share:
// the key that names a mask, the checks of the rate and of every call's
// buffers, the derived constants (the scale 1 / (1 - rate) and the 32-bit
// keep threshold, so both devices keep exactly the same elements), and the
// record of whether a Forward has run (Backward applies its mask). A device
// op derives from DropoutBase and implements RunForward and RunBackward,
// which are called only once the buffers have passed the checks; callers use
// Forward and Backward (see cpu/dropout.h for the mask's definition and an
// example).
#ifndef PSTRAIN_COMPUTE_DROPOUT_BASE_H_
#define PSTRAIN_COMPUTE_DROPOUT_BASE_H_

#include <cstdint>

#include "absl/status/status.h"

namespace pstrain {
namespace worker {

// Which mask a Forward draws: the same key gives the same mask on any
// device and machine (cpu/dropout.h).
struct DropoutKey {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint64_t offset = 0;
};

class DropoutBase {
 public:
  virtual ~DropoutBase() = default;

  DropoutBase(const DropoutBase&) = delete;
  DropoutBase& operator=(const DropoutBase&) = delete;

  int64_t num_elements() const { return num_elements_; }
  float rate() const { return rate_; }
  // 1 / (1 - rate), the factor kept elements are multiplied by.
  float scale() const { return scale_; }

  // y = x * mask * scale, drawing the mask for `key`; x == y allowed.
  // With rate 0, y == x exactly.
  absl::Status Forward(const float* x, const DropoutKey& key, float* y);

  // dx = dy * mask * scale with the last Forward's mask; dy == dx allowed.
  // FAILED_PRECONDITION before any Forward.
  absl::Status Backward(const float* dy, float* dx);

 protected:
  // REQUIRES: CheckArgs(num_elements, rate) is OK.
  DropoutBase(int64_t num_elements, float rate);

  // INVALID_ARGUMENT naming Dropout unless num_elements > 0 and
  // 0 <= rate < 1.
  static absl::Status CheckArgs(int64_t num_elements, float rate);

  // Whether the last Forward succeeded.
  bool has_forward() const { return has_forward_; }

  // The device's work of Forward and Backward, the buffers checked.
  virtual absl::Status RunForward(const float* x, const DropoutKey& key,
                                  float* y) = 0;
  virtual absl::Status RunBackward(const float* dy, float* dx) = 0;

  const int64_t num_elements_;
  const float rate_;
  const float scale_;
  // An element is kept iff its 32-bit draw is >= threshold_ (rate * 2^32,
  // rounded).
  const uint64_t threshold_;

 private:
  bool has_forward_ = false;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_DROPOUT_BASE_H_
