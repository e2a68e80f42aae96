// pstrain's own CUDA kernels: what cuDNN and cuBLAS do not provide for the
// GPU ops (layout changes, bias add and gradient, ReLU, dropout, the losses).
//
// Plain C++ (compiled by nvcc, so no Abseil): each Launch* function enqueues
// one kernel on `stream` and returns the launch error; errors while the kernel
// runs surface at the next synchronization. All pointers are device pointers.
// The arithmetic of each element lives in kernel_math.h. The ops (conv2d.h,
// ...) turn the returned codes into absl::Status; nothing else should call
// these directly.
#ifndef PSTRAIN_COMPUTE_GPU_KERNELS_H_
#define PSTRAIN_COMPUTE_GPU_KERNELS_H_

#include <cuda_runtime.h>
#include <stdint.h>

#include "compute/gpu/kernel_math.h"

namespace pstrain {
namespace worker {
namespace gpu {

// out = the transpose of the row-major [rows, cols] matrix `in` ([cols, rows]).
cudaError_t LaunchTranspose(const float* in, int64_t rows, int64_t cols,
                            float* out, cudaStream_t stream);

// Copies x [batch, g.height, g.width, g.channels] into padded
// [batch, g.padded_height, g.padded_width, g.channels] at (g.top, g.left) and
// sets every other element to `fill`.
cudaError_t LaunchPadNhwc(const float* x, int64_t batch, const PadGeometry& g,
                          float fill, float* padded, cudaStream_t stream);

// The inverse of LaunchPadNhwc: x = the [g.height, g.width] window of padded
// at (g.top, g.left).
cudaError_t LaunchCropNhwc(const float* padded, int64_t batch,
                           const PadGeometry& g, float* x, cudaStream_t stream);

// y[r, c] += b[c] for the row-major [rows, cols] matrix y.
cudaError_t LaunchBiasAdd(const float* b, int64_t rows, int64_t cols, float* y,
                          cudaStream_t stream);

// db[c] = sum over r of dy[r, c] (accumulated in double, in a fixed order, so
// the result is deterministic).
cudaError_t LaunchBiasGrad(const float* dy, int64_t rows, int64_t cols,
                           float* db, cudaStream_t stream);

// y = max(x, 0); x == y allowed.
cudaError_t LaunchReluForward(const float* x, int64_t n, float* y,
                              cudaStream_t stream);

// dx = y > 0 ? dy : 0; dy == dx allowed.
cudaError_t LaunchReluBackward(const float* y, const float* dy, int64_t n,
                               float* dx, cudaStream_t stream);

// dw[i] += alpha * sign(w[i]) (sign(0) = 0): an L1 regularizer's gradient.
cudaError_t LaunchAddScaledSign(const float* w, int64_t n, float alpha,
                                float* dw, cudaStream_t stream);

// Dropout forward over n elements whose global indices start at `offset`
// (kernel_math.h's DropoutForwardBlock for every Philox block they touch).
cudaError_t LaunchDropoutForward(const float* x, int64_t n, uint64_t seed,
                                 uint64_t step, uint64_t offset,
                                 uint64_t threshold, float scale, uint8_t* mask,
                                 float* y, cudaStream_t stream);

// dx = mask ? dy * scale : 0; dy == dx allowed.
cudaError_t LaunchDropoutBackward(const float* dy, const uint8_t* mask,
                                  int64_t n, float scale, float* dx,
                                  cudaStream_t stream);

// y[i, :] = table[ids[i], :] for the n ids; the ids must lie in
// [0, input_dim) (the op checks them on the host first).
cudaError_t LaunchEmbeddingForward(const int32_t* ids, int64_t n,
                                   const float* table, int64_t output_dim,
                                   float* y, cudaStream_t stream);

// dtable[ids[i], :] += dy[i, :] for the n ids (atomic adds: the order in
// which a repeated id's rows are added varies). The caller zeroes dtable.
cudaError_t LaunchEmbeddingBackward(const int32_t* ids, int64_t n,
                                    const float* dy, int64_t output_dim,
                                    float* dtable, cudaStream_t stream);

// The loss kernels run one thread per row (example). Each writes its row's
// result into row_out[row] (double); a row whose label lies outside
// [0, classes) gets 0 and no gradient, and the smallest such row is
// atomicMin-ed into *bad_row, which the caller sets to all ones (no bad row)
// beforehand. A null gradient pointer skips the gradient.

// row_out = -log softmax(logits)[label]; dlogits = softmax - onehot.
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits,
                                      const int32_t* labels, int64_t batch,
                                      int64_t classes, float* dlogits,
                                      double* row_out,
                                      unsigned long long* bad_row,
                                      cudaStream_t stream);

// Keras's cross-entropy from probabilities clipped to [low, high].
cudaError_t LaunchCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, int64_t classes,
    float low, float high, float* dprobs, double* row_out,
    unsigned long long* bad_row, cudaStream_t stream);

// row_out = sum_j (p - t)^2 over the row; dpredictions = 2 (p - t) / outputs.
cudaError_t LaunchSquaredError(const float* predictions, const float* targets,
                               int64_t batch, int64_t outputs,
                               float* dpredictions, double* row_out,
                               cudaStream_t stream);

// row_out = 1 if the row's first argmax equals its label, else 0.
cudaError_t LaunchCountCorrect(const float* scores, const int32_t* labels,
                               int64_t batch, int64_t classes, double* row_out,
                               unsigned long long* bad_row,
                               cudaStream_t stream);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_KERNELS_H_
