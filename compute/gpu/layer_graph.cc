#include "compute/gpu/layer_graph.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/graph_kernels.h"
#include "compute/layer_graph_impl.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<DeviceBuffer> GpuGraphDevice::Allocate(Device* device,
                                                      int64_t floats) {
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  const int64_t bytes = floats * static_cast<int64_t>(sizeof(float));
  PSTRAIN_ASSIGN_OR_RETURN(DeviceBuffer buffer, device->Allocate(bytes));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(buffer.data(), 0, bytes, device->stream()),
                 "LayerGraph: cudaMemsetAsync"));
  return buffer;
}

absl::Status GpuGraphDevice::Add(Device* device, const float* add, int64_t n,
                                 float* sum) {
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  return CudaStatus(LaunchAccumulate(add, n, sum, device->stream()),
                    "LayerGraph: accumulate");
}

}  // namespace gpu

template class LayerGraph<gpu::GpuGraphDevice>;

}  // namespace worker
}  // namespace pstrain
