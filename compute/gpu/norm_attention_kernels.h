// pstrain's CUDA kernels for the normalization and attention GPU ops
// (batch_norm.h, layer_norm.h, attention.h): the batch statistics and the
// normalizations with their gradients, where cuDNN's float32 sums would not
// match the CPU ops' double ones; the head layout changes and the masked
// softmax of attention, which cuBLAS does not do.
//
// Plain C++ (compiled by nvcc, so no Abseil), as kernels.h: each Launch*
// function enqueues its kernels on `stream` and returns the first launch
// error; errors while they run surface at the next synchronization. All
// pointers are device pointers; matrices are row-major. Sums are accumulated
// in double in an order fixed by the sizes alone, so every result is
// deterministic (no atomics). Only the ops should call these.
#ifndef PSTRAIN_COMPUTE_GPU_NORM_ATTENTION_KERNELS_H_
#define PSTRAIN_COMPUTE_GPU_NORM_ATTENTION_KERNELS_H_

#include <cuda_runtime.h>
#include <stdint.h>

namespace pstrain {
namespace worker {
namespace gpu {

// Column sums over [rows, cols] are done in two steps: each of
// ColumnSumParts(rows) groups of rows writes its partial sums (double) into
// a scratch buffer, then one pass adds the groups in order. The scratch
// holds ColumnSumScratch(rows, cols) doubles.
int64_t ColumnSumParts(int64_t rows);
int64_t ColumnSumScratch(int64_t rows, int64_t cols);

// ---------------------------------------------------------------------------
// BatchNormalization over the last axis of x [rows, channels].

// The batch statistics, two passes in double as cpu::BatchNormOp's:
// mean[c] = sum_r x / rows, variance[c] = sum_r (x - mean)^2 / rows (biased),
// written as float. scratch: ColumnSumScratch(rows, channels) + channels
// doubles.
cudaError_t LaunchBatchNormStatistics(const float* x, int64_t rows,
                                      int64_t channels, double* scratch,
                                      float* mean, float* variance,
                                      cudaStream_t stream);

// y = gamma * (x - mean) / sqrt(variance + epsilon) + beta per channel;
// gamma null: 1, beta null: 0.
cudaError_t LaunchBatchNormForward(const float* x, int64_t rows,
                                   int64_t channels, const float* mean,
                                   const float* variance, float epsilon,
                                   const float* gamma, const float* beta,
                                   float* y, cudaStream_t stream);

// The gradient of a training forward with these statistics (batch_norm.h's
// formulas): dbeta = sum_r dy, dgamma = sum_r dy * xhat, and, unless dx is
// null, dx. dgamma, dbeta may each be null (not written); gamma null: 1.
// scratch: ColumnSumScratch(rows, 2 * channels) + 2 * channels doubles.
cudaError_t LaunchBatchNormBackward(const float* x, const float* dy,
                                    int64_t rows, int64_t channels,
                                    const float* mean, const float* variance,
                                    float epsilon, const float* gamma,
                                    double* scratch, float* dx, float* dgamma,
                                    float* dbeta, cudaStream_t stream);

// out[i] = in[i] * scale for n elements (the moving statistics' "gradients",
// the batch statistics times the batch).
cudaError_t LaunchScale(const float* in, int64_t n, float scale, float* out,
                        cudaStream_t stream);

// ---------------------------------------------------------------------------
// LayerNormalization over the last axis of x [rows, width]: one block per
// row.

// Per row: mean and variance (biased; two passes in double, stored as
// float) and y = gamma * (x - mean) / sqrt(variance + epsilon) + beta.
// gamma null: 1, beta null: 0.
cudaError_t LaunchLayerNormForward(const float* x, int64_t rows, int64_t width,
                                   float epsilon, const float* gamma,
                                   const float* beta, float* y, float* mean,
                                   float* variance, cudaStream_t stream);

// dx per row from the forward's statistics (layer_norm.h's formula, sums in
// double); gamma null: 1.
cudaError_t LaunchLayerNormBackwardData(const float* x, const float* dy,
                                        int64_t rows, int64_t width,
                                        const float* mean,
                                        const float* variance, float epsilon,
                                        const float* gamma, float* dx,
                                        cudaStream_t stream);

// dgamma = sum_r dy * xhat and dbeta = sum_r dy, each may be null.
// scratch: ColumnSumScratch(rows, 2 * width) doubles.
cudaError_t LaunchLayerNormBackwardParams(const float* x, const float* dy,
                                          int64_t rows, int64_t width,
                                          const float* mean,
                                          const float* variance, float epsilon,
                                          double* scratch, float* dgamma,
                                          float* dbeta, cudaStream_t stream);

// ---------------------------------------------------------------------------
// MultiHeadAttention.

// out [B, H, T, D] = in [B, T, H, D] (+ bias [H, D] when not null): a
// projection split into per-head matrices.
cudaError_t LaunchSplitHeads(const float* in, const float* bias, int64_t batch,
                             int64_t steps, int64_t heads, int64_t dim,
                             float* out, cudaStream_t stream);

// out [B, T, H, D] = in [B, H, T, D]: the inverse of LaunchSplitHeads.
cudaError_t LaunchMergeHeads(const float* in, int64_t batch, int64_t steps,
                             int64_t heads, int64_t dim, float* out,
                             cudaStream_t stream);

// In place over scores [blocks, tq, tv]: each row (one query position)
// becomes its softmax over tv. With causal, row i of each block keeps key
// positions j <= i only; the others get probability exactly 0.
cudaError_t LaunchAttentionSoftmax(float* scores, int64_t blocks, int64_t tq,
                                   int64_t tv, bool causal,
                                   cudaStream_t stream);

// In place over d [rows, tv]: d = p * (d - sum_j d * p) per row, the
// softmax's backward from its output p [rows, tv].
cudaError_t LaunchAttentionSoftmaxBackward(const float* p, int64_t rows,
                                           int64_t tv, float* d,
                                           cudaStream_t stream);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_NORM_ATTENTION_KERNELS_H_
