// The checks and the Keras output windows of a 2D pooling's shape, shared
// by the pooling ops of both devices (MaxPool2DOp and AvgPool2DOp in
// max_pool2d.h and pool2d.h, gpu/max_pool2d.h) before they build their
// oneDNN or cuDNN objects. No library beyond Abseil: the GPU ops use it too.
//
//   PSTRAIN_ASSIGN_OR_RETURN(PoolWindows windows,
//                            CheckPool2D("MaxPool2D", shape));
//   // windows.height.output, windows.width.pad_before, ...
#ifndef PSTRAIN_COMPUTE_CPU_POOL_WINDOWS_H_
#define PSTRAIN_COMPUTE_CPU_POOL_WINDOWS_H_

#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/window.h"

namespace pstrain {
namespace worker {
namespace cpu {

struct PoolWindows {
  Window height;
  Window width;
};

// The windows of `shape` (KerasWindow of each spatial axis). INVALID_ARGUMENT
// naming `op` and the size that is not positive ("MaxPool2D: stride_w must
// be positive, got 0") or is above `max_size` (a GPU op's int limit), or
// `op`, the axis and why its window does not fit ("AvgPool2D height: valid
// padding: kernel 6 is larger than input 5").
absl::StatusOr<PoolWindows> CheckPool2D(
    absl::string_view op, const Pool2DShape& shape,
    int64_t max_size = std::numeric_limits<int64_t>::max());

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_POOL_WINDOWS_H_
