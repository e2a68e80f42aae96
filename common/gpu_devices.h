// How many GPUs this process can use, in every build: with CUDA it asks the
// driver (common/cuda_probe.h); in a CPU-only build it says so. Binaries
// use it to resolve --device=auto.
#ifndef PSTRAIN_COMMON_GPU_DEVICES_H_
#define PSTRAIN_COMMON_GPU_DEVICES_H_

#include "absl/status/statusor.h"

namespace pstrain {

// The number of usable GPUs (> 0), or FAILED_PRECONDITION saying why there is
// none ("no CUDA device: ...", "built without CUDA").
absl::StatusOr<int> GpuDeviceCount();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_GPU_DEVICES_H_
