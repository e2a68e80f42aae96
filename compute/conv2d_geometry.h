// What the CPU's and the GPU's Conv2D ops (compute/cpu/conv2d.h,
// compute/gpu/conv2d.h) both derive from a Conv2DShape before they make
// anything: that the groups divide the channels, and Keras's output window
// (size and padding) along the height and the width.
//
//   PSTRAIN_RETURN_IF_ERROR(CheckConv2DGroups(shape));
//   PSTRAIN_ASSIGN_OR_RETURN(const Conv2DWindows out,
//                            Conv2DOutputWindows(shape));
//   // out.height.output rows of out.width.output positions.
//
// Both ops derive from Conv2DOpGeometry, which keeps the shape and windows.
#ifndef PSTRAIN_COMPUTE_CONV2D_GEOMETRY_H_
#define PSTRAIN_COMPUTE_CONV2D_GEOMETRY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/window.h"
#include "compute/shaped_op.h"

namespace pstrain {
namespace worker {

struct Conv2DWindows {
  cpu::Window height;
  cpu::Window width;
};

// INVALID_ARGUMENT naming Conv2D unless groups divides in_channels and
// out_channels. REQUIRES: groups > 0.
absl::Status CheckConv2DGroups(const cpu::Conv2DShape& shape);

// The output windows of the (dilated) kernel over the input, with Keras's
// padding; KerasWindow's error for a kernel larger than a valid input.
absl::StatusOr<Conv2DWindows> Conv2DOutputWindows(
    const cpu::Conv2DShape& shape);

// A Conv2D op's shape and output windows, the base of both devices' ops.
class Conv2DOpGeometry : public ShapedOp<cpu::Conv2DShape> {
 public:
  int64_t out_height() const { return out_h_.output; }
  int64_t out_width() const { return out_w_.output; }

 protected:
  Conv2DOpGeometry(const cpu::Conv2DShape& shape, const Conv2DWindows& out)
      : ShapedOp(shape), out_h_(out.height), out_w_(out.width) {}

  const cpu::Window out_h_;
  const cpu::Window out_w_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CONV2D_GEOMETRY_H_
