#include "common/cuda_probe_kernels.h"

namespace pstrain {
namespace {

__global__ void AxpyKernel(float a, const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

}  // namespace

cudaError_t LaunchAxpy(float a, const float* x, float* y, int n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int blocks = (n + kThreads - 1) / kThreads < 1024
                         ? (n + kThreads - 1) / kThreads
                         : 1024;
  AxpyKernel<<<blocks, kThreads, 0, stream>>>(a, x, y, n);
  return cudaGetLastError();
}

}  // namespace pstrain
