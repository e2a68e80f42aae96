#include "compute/conv2d_geometry.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

absl::Status CheckConv2DGroups(const cpu::Conv2DShape& shape) {
  if (shape.in_channels % shape.groups != 0 ||
      shape.out_channels % shape.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2D: groups ", shape.groups, " must divide in_channels ",
        shape.in_channels, " and out_channels ", shape.out_channels));
  }
  return absl::OkStatus();
}

absl::StatusOr<Conv2DWindows> Conv2DOutputWindows(
    const cpu::Conv2DShape& shape) {
  absl::StatusOr<cpu::Window> height = cpu::KerasWindow(
      shape.height, cpu::DilatedExtent(shape.kernel_h, shape.dilation_h),
      shape.stride_h, shape.padding);
  if (!height.ok()) return height.status();
  absl::StatusOr<cpu::Window> width = cpu::KerasWindow(
      shape.width, cpu::DilatedExtent(shape.kernel_w, shape.dilation_w),
      shape.stride_w, shape.padding);
  if (!width.ok()) return width.status();
  return Conv2DWindows{*height, *width};
}

}  // namespace worker
}  // namespace pstrain
