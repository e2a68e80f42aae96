#include "compute/cpu/pool_windows.h"

#include "absl/strings/str_cat.h"
#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<PoolWindows> CheckPool2D(absl::string_view op,
                                        const Pool2DShape& shape) {
  absl::Status status = CheckPositive(op, {{"batch", shape.batch},
                                           {"height", shape.height},
                                           {"width", shape.width},
                                           {"channels", shape.channels},
                                           {"pool_h", shape.pool_h},
                                           {"pool_w", shape.pool_w},
                                           {"stride_h", shape.stride_h},
                                           {"stride_w", shape.stride_w}});
  if (!status.ok()) return status;
  absl::StatusOr<Window> height =
      KerasWindow(shape.height, shape.pool_h, shape.stride_h, shape.padding);
  if (!height.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " height: ", height.status().message()));
  }
  absl::StatusOr<Window> width =
      KerasWindow(shape.width, shape.pool_w, shape.stride_w, shape.padding);
  if (!width.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " width: ", width.status().message()));
  }
  return PoolWindows{*height, *width};
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
