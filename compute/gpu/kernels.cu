#include "compute/gpu/kernel_grid.h"
#include "compute/gpu/kernels.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

__global__ void TransposeKernel(const float* in, int64_t rows, int64_t cols,
                                float* out) {
  const int64_t n = rows * cols;
  for (int64_t o = FirstIndex(); o < n; o += GridStride()) {
    out[o] = in[TransposeSourceIndex(o, rows, cols)];
  }
}

__global__ void PadKernel(const float* x, int64_t n, PadGeometry g, float fill,
                          float* padded) {
  for (int64_t p = FirstIndex(); p < n; p += GridStride()) {
    const int64_t source = PadSourceIndex(p, g);
    padded[p] = source < 0 ? fill : x[source];
  }
}

__global__ void CropKernel(const float* padded, int64_t n, PadGeometry g,
                           float* x) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    x[i] = padded[CropSourceIndex(i, g)];
  }
}

__global__ void BiasAddKernel(const float* b, int64_t rows, int64_t cols,
                              float* y) {
  const int64_t n = rows * cols;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    y[i] += b[i % cols];
  }
}

// Block (kBiasCols, kBiasRows): thread (x, y) sums column
// blockIdx.x * kBiasCols + x over rows y, y + kBiasRows, ...; the block then
// adds its kBiasRows partial sums in a fixed order.
constexpr int kBiasCols = 32;
constexpr int kBiasRows = 16;

__global__ void BiasGradKernel(const float* dy, int64_t rows, int64_t cols,
                               float* db) {
  __shared__ double partial[kBiasRows][kBiasCols + 1];
  const int64_t col =
      static_cast<int64_t>(blockIdx.x) * kBiasCols + threadIdx.x;
  double sum = 0;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kBiasRows) {
      sum += dy[r * cols + col];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    double total = 0;
    for (int k = 0; k < kBiasRows; ++k) total += partial[k][threadIdx.x];
    db[col] = static_cast<float>(total);
  }
}

__global__ void ReluForwardKernel(const float* x, int64_t n, float* y) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
}

__global__ void AddScaledSignKernel(const float* w, int64_t n, float alpha,
                                    float* dw) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float v = w[i];
    dw[i] += alpha * (v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f));
  }
}

__global__ void ReluBackwardKernel(const float* y, const float* dy, int64_t n,
                                   float* dx) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

__global__ void DropoutForwardKernel(const float* x, uint64_t n, uint64_t seed,
                                     uint64_t step, uint64_t offset,
                                     uint64_t first_block, uint64_t num_blocks,
                                     uint64_t threshold, float scale,
                                     uint8_t* mask, float* y) {
  for (int64_t b = FirstIndex(); static_cast<uint64_t>(b) < num_blocks;
       b += GridStride()) {
    DropoutForwardBlock(first_block + b, x, n, offset, seed, step, threshold,
                        scale, mask, y);
  }
}

__global__ void DropoutBackwardKernel(const float* dy, const uint8_t* mask,
                                      int64_t n, float scale, float* dx) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    dx[i] = mask[i] ? dy[i] * scale : 0.0f;
  }
}

// True if the row's label is usable; else records the row and zeroes its
// result (and gradient).
__device__ bool CheckLabel(const int32_t* labels, int64_t row, int64_t classes,
                           float* grad, double* row_out,
                           unsigned long long* bad_row) {
  const int32_t label = labels[row];
  if (label >= 0 && label < classes) return true;
  atomicMin(bad_row, static_cast<unsigned long long>(row));
  row_out[row] = 0;
  if (grad != nullptr) {
    for (int64_t j = 0; j < classes; ++j) grad[row * classes + j] = 0.0f;
  }
  return false;
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits,
                                          const int32_t* labels, int64_t batch,
                                          int64_t classes, float* dlogits,
                                          double* row_out,
                                          unsigned long long* bad_row) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    if (!CheckLabel(labels, row, classes, dlogits, row_out, bad_row)) continue;
    row_out[row] = SoftmaxCrossEntropyRow(
        logits + row * classes, labels[row], classes,
        dlogits == nullptr ? nullptr : dlogits + row * classes);
  }
}

__global__ void CrossEntropyFromProbabilitiesKernel(
    const float* probs, const int32_t* labels, int64_t batch, int64_t classes,
    float low, float high, float* dprobs, double* row_out,
    unsigned long long* bad_row) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    if (!CheckLabel(labels, row, classes, dprobs, row_out, bad_row)) continue;
    row_out[row] = CrossEntropyFromProbabilitiesRow(
        probs + row * classes, labels[row], classes, low, high,
        dprobs == nullptr ? nullptr : dprobs + row * classes);
  }
}

__global__ void SquaredErrorKernel(const float* predictions,
                                   const float* targets, int64_t batch,
                                   int64_t outputs, float* dpredictions,
                                   double* row_out) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    row_out[row] = SquaredErrorRow(
        predictions + row * outputs, targets + row * outputs, outputs,
        dpredictions == nullptr ? nullptr : dpredictions + row * outputs);
  }
}

__global__ void CountCorrectKernel(const float* scores, const int32_t* labels,
                                   int64_t batch, int64_t classes,
                                   double* row_out,
                                   unsigned long long* bad_row) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    if (!CheckLabel(labels, row, classes, nullptr, row_out, bad_row)) continue;
    row_out[row] =
        ArgMaxRow(scores + row * classes, classes) == labels[row] ? 1.0 : 0.0;
  }
}

__global__ void EmbeddingForwardKernel(const int32_t* ids, int64_t n,
                                       const float* table, int64_t dim,
                                       float* y) {
  for (int64_t e = FirstIndex(); e < n * dim; e += GridStride()) {
    y[e] = table[static_cast<int64_t>(ids[e / dim]) * dim + e % dim];
  }
}

__global__ void EmbeddingBackwardKernel(const int32_t* ids, int64_t n,
                                        const float* dy, int64_t dim,
                                        float* dtable) {
  for (int64_t e = FirstIndex(); e < n * dim; e += GridStride()) {
    atomicAdd(&dtable[static_cast<int64_t>(ids[e / dim]) * dim + e % dim],
              dy[e]);
  }
}

}  // namespace

cudaError_t LaunchTranspose(const float* in, int64_t rows, int64_t cols,
                            float* out, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  TransposeKernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t LaunchPadNhwc(const float* x, int64_t batch, const PadGeometry& g,
                          float fill, float* padded, cudaStream_t stream) {
  const int64_t n = batch * g.padded_height * g.padded_width * g.channels;
  if (n <= 0) return cudaSuccess;
  PadKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, g, fill, padded);
  return cudaGetLastError();
}

cudaError_t LaunchCropNhwc(const float* padded, int64_t batch,
                           const PadGeometry& g, float* x,
                           cudaStream_t stream) {
  const int64_t n = batch * g.height * g.width * g.channels;
  if (n <= 0) return cudaSuccess;
  CropKernel<<<BlocksFor(n), kThreads, 0, stream>>>(padded, n, g, x);
  return cudaGetLastError();
}

cudaError_t LaunchBiasAdd(const float* b, int64_t rows, int64_t cols, float* y,
                          cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  BiasAddKernel<<<BlocksFor(n), kThreads, 0, stream>>>(b, rows, cols, y);
  return cudaGetLastError();
}

cudaError_t LaunchBiasGrad(const float* dy, int64_t rows, int64_t cols,
                           float* db, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  const int64_t blocks = (cols + kBiasCols - 1) / kBiasCols;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  BiasGradKernel<<<static_cast<unsigned>(blocks), dim3(kBiasCols, kBiasRows), 0,
                   stream>>>(dy, rows, cols, db);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingForward(const int32_t* ids, int64_t n,
                                   const float* table, int64_t output_dim,
                                   float* y, cudaStream_t stream) {
  if (n <= 0 || output_dim <= 0) return cudaSuccess;
  EmbeddingForwardKernel<<<BlocksFor(n * output_dim), kThreads, 0, stream>>>(
      ids, n, table, output_dim, y);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBackward(const int32_t* ids, int64_t n,
                                    const float* dy, int64_t output_dim,
                                    float* dtable, cudaStream_t stream) {
  if (n <= 0 || output_dim <= 0) return cudaSuccess;
  EmbeddingBackwardKernel<<<BlocksFor(n * output_dim), kThreads, 0, stream>>>(
      ids, n, dy, output_dim, dtable);
  return cudaGetLastError();
}

cudaError_t LaunchReluForward(const float* x, int64_t n, float* y,
                              cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluForwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, y);
  return cudaGetLastError();
}

cudaError_t LaunchAddScaledSign(const float* w, int64_t n, float alpha,
                                float* dw, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AddScaledSignKernel<<<BlocksFor(n), kThreads, 0, stream>>>(w, n, alpha, dw);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(const float* y, const float* dy, int64_t n,
                               float* dx, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(y, dy, n, dx);
  return cudaGetLastError();
}

cudaError_t LaunchDropoutForward(const float* x, int64_t n, uint64_t seed,
                                 uint64_t step, uint64_t offset,
                                 uint64_t threshold, float scale, uint8_t* mask,
                                 float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const uint64_t count = static_cast<uint64_t>(n);
  const uint64_t first_block = offset / 4;
  const uint64_t last_block = (offset + count - 1) / 4;
  const uint64_t num_blocks = last_block - first_block + 1;
  DropoutForwardKernel<<<BlocksFor(static_cast<int64_t>(num_blocks)), kThreads,
                         0, stream>>>(x, count, seed, step, offset, first_block,
                                      num_blocks, threshold, scale, mask, y);
  return cudaGetLastError();
}

cudaError_t LaunchDropoutBackward(const float* dy, const uint8_t* mask,
                                  int64_t n, float scale, float* dx,
                                  cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(dy, mask, n,
                                                               scale, dx);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits,
                                      const int32_t* labels, int64_t batch,
                                      int64_t classes, float* dlogits,
                                      double* row_out,
                                      unsigned long long* bad_row,
                                      cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  SoftmaxCrossEntropyKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      logits, labels, batch, classes, dlogits, row_out, bad_row);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, int64_t classes,
    float low, float high, float* dprobs, double* row_out,
    unsigned long long* bad_row, cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  CrossEntropyFromProbabilitiesKernel<<<BlocksFor(batch), kThreads, 0,
                                        stream>>>(
      probs, labels, batch, classes, low, high, dprobs, row_out, bad_row);
  return cudaGetLastError();
}

cudaError_t LaunchSquaredError(const float* predictions, const float* targets,
                               int64_t batch, int64_t outputs,
                               float* dpredictions, double* row_out,
                               cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  SquaredErrorKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      predictions, targets, batch, outputs, dpredictions, row_out);
  return cudaGetLastError();
}

cudaError_t LaunchCountCorrect(const float* scores, const int32_t* labels,
                               int64_t batch, int64_t classes, double* row_out,
                               unsigned long long* bad_row,
                               cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  CountCorrectKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      scores, labels, batch, classes, row_out, bad_row);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
