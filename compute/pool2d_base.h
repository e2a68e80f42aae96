// What the 2D pooling ops of both devices share: MaxPool2DOp
// (cpu/max_pool2d.h, gpu/max_pool2d.h) and AvgPool2DOp (cpu/pool2d.h). The
// base holds the shape and its Keras output windows (cpu/pool_windows.h),
// the public Forward/Backward contract over NHWC buffers with the checks of
// each call's buffers, and whether a Forward has run, for the pools whose
// Backward goes through the last Forward's maxima. A device op derives from
// Pool2DBase and implements RunForward and RunBackward, called only once the
// buffers have passed the checks (and, where Backward needs a Forward, one
// has run); callers use Forward and Backward (see cpu/max_pool2d.h for an
// example).
#ifndef PSTRAIN_COMPUTE_POOL2D_BASE_H_
#define PSTRAIN_COMPUTE_POOL2D_BASE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/pool_windows.h"
#include "compute/cpu/window.h"

namespace pstrain {
namespace worker {

using ::pstrain::worker::cpu::Pool2DShape;
using ::pstrain::worker::cpu::PoolWindows;
using ::pstrain::worker::cpu::Window;

class Pool2DBase {
 public:
  virtual ~Pool2DBase() = default;

  Pool2DBase(const Pool2DBase&) = delete;
  Pool2DBase& operator=(const Pool2DBase&) = delete;

  const Pool2DShape& shape() const { return shape_; }
  int64_t out_height() const { return out_h_.output; }
  int64_t out_width() const { return out_w_.output; }

  // x: [N, H, W, C]; y: [N, out_height, out_width, C].
  absl::Status Forward(const float* x, float* y);

  // dx (overwritten) from dy. A pool whose Backward goes through the last
  // Forward (MaxPool2D, through its maxima) is FAILED_PRECONDITION before
  // any Forward; AvgPool2D needs none.
  absl::Status Backward(const float* dy, float* dx);

 protected:
  // `op` names the op in errors ("MaxPool2D"); it must outlive this object
  // (a string literal). `windows` are CheckPool2D's for `shape`.
  Pool2DBase(const char* op, const Pool2DShape& shape,
             const PoolWindows& windows, bool backward_needs_forward)
      : op_(op),
        shape_(shape),
        out_h_(windows.height),
        out_w_(windows.width),
        backward_needs_forward_(backward_needs_forward) {}

  // The device's work of Forward and Backward, the buffers checked.
  virtual absl::Status RunForward(const float* x, float* y) = 0;
  virtual absl::Status RunBackward(const float* dy, float* dx) = 0;

  const char* const op_;
  const Pool2DShape shape_;
  const Window out_h_;
  const Window out_w_;

 private:
  const bool backward_needs_forward_;
  bool has_forward_ = false;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_POOL2D_BASE_H_
