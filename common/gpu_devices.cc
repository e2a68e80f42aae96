#include "common/gpu_devices.h"

#ifdef PSTRAIN_WITH_CUDA
#include "common/cuda_probe.h"
#endif

namespace pstrain {

absl::StatusOr<int> GpuDeviceCount() {
#ifdef PSTRAIN_WITH_CUDA
  return CudaDeviceCount();
#else
  return absl::FailedPreconditionError(
      "no GPU support: built without CUDA (--config=cpu, or no toolkit found)");
#endif
}

}  // namespace pstrain
