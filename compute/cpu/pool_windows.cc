#include "compute/cpu/pool_windows.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<PoolWindows> CheckPool2D(absl::string_view op,
                                        const Pool2DShape& shape,
                                        int64_t max_size) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"batch", shape.batch},       {"height", shape.height},
      {"width", shape.width},       {"channels", shape.channels},
      {"pool_h", shape.pool_h},     {"pool_w", shape.pool_w},
      {"stride_h", shape.stride_h}, {"stride_w", shape.stride_w}};
  for (const auto& [name, value] : sizes) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " must be positive, got ", value));
    }
    if (value > max_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", name, " must be at most ", max_size, ", got ", value));
    }
  }
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
