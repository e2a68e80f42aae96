// The launch geometry that pstrain's CUDA kernel files (kernels.cu,
// loss_kernels.cu, norm_attention_kernels.cu, graph_kernels.cu) share:
// blocks of kThreads threads running grid-stride loops, so that at most
// kMaxBlocks blocks cover any number of elements.
//
//   Scale<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, y);
//   __global__ void Scale(const float* x, int64_t n, float* y) {
//     for (int64_t i = FirstIndex(); i < n; i += GridStride()) y[i] = ...;
//   }
//
// Device code: include it from .cu files only (nvcc), after the file's own
// header, and list it in the cuda_library's hdrs.
#ifndef PSTRAIN_COMPUTE_GPU_KERNEL_GRID_H_
#define PSTRAIN_COMPUTE_GPU_KERNEL_GRID_H_

#include <cstdint>

namespace pstrain {
namespace worker {
namespace gpu {

constexpr int kThreads = 256;
// Grid-stride loops cover any n with at most this many blocks.
constexpr int64_t kMaxBlocks = 4096;

// Blocks for a grid-stride loop over n elements (0 for none).
inline int BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// The calling thread's first element, and the distance to its next.
__device__ inline int64_t FirstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ inline int64_t GridStride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_KERNEL_GRID_H_
