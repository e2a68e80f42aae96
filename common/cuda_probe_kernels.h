// Device kernels of cuda_probe (compiled by nvcc; no Abseil here).
#ifndef PSTRAIN_COMMON_CUDA_PROBE_KERNELS_H_
#define PSTRAIN_COMMON_CUDA_PROBE_KERNELS_H_

#include <cuda_runtime.h>

namespace pstrain {

// Launches y[i] = a * x[i] + y[i] for i < n on `stream`; returns the launch
// error (execution errors surface at the next synchronization).
cudaError_t LaunchAxpy(float a, const float* x, float* y, int n,
                       cudaStream_t stream);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CUDA_PROBE_KERNELS_H_
