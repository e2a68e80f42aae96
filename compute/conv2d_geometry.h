// What the CPU's and the GPU's Conv2D ops (compute/cpu/conv2d.h,
// compute/gpu/conv2d.h) both derive from a Conv2DShape before they make
// anything: that the groups divide the channels, and Keras's output window
// (size and padding) along the height and the width.
//
//   PSTRAIN_RETURN_IF_ERROR(CheckConv2DGroups(shape));
//   PSTRAIN_ASSIGN_OR_RETURN(const Conv2DWindows out,
//                            Conv2DOutputWindows(shape));
//   // out.height.output rows of out.width.output positions.
#ifndef PSTRAIN_COMPUTE_CONV2D_GEOMETRY_H_
#define PSTRAIN_COMPUTE_CONV2D_GEOMETRY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/window.h"

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

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CONV2D_GEOMETRY_H_
