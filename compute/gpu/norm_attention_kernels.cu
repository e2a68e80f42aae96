#include "compute/gpu/kernel_grid.h"
#include "compute/gpu/norm_attention_kernels.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

// Row-per-block kernels loop over rows past this many blocks.
constexpr int64_t kMaxRowBlocks = 65535;

// ---------------------------------------------------------------------------
// Column sums in two steps (see the header): a block of kColumnTile x
// kRowThreads threads covers kColumnTile columns of one group of rows; the
// groups interleave (group g takes rows g * kRowThreads + y, then
// parts * kRowThreads further on, ...).

constexpr int kColumnTile = 32;
constexpr int kRowThreads = 8;
// Rows each thread adds before another group is worth starting.
constexpr int64_t kRowsPerThread = 16;
constexpr int64_t kMaxParts = 256;

// Term(r, c, sums) adds row r's terms for column c into sums[0 .. kTerms).
// partial: [parts][kTerms * cols], term k of column c at k * cols + c.
template <int kTerms, typename Term>
__global__ void ColumnPartsKernel(Term term, int64_t rows, int64_t cols,
                                  double* partial) {
  __shared__ double tile[kTerms][kRowThreads][kColumnTile + 1];
  const int64_t c =
      static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  double sums[kTerms];
  for (int k = 0; k < kTerms; ++k) sums[k] = 0;
  if (c < cols) {
    const int64_t step = static_cast<int64_t>(gridDim.y) * kRowThreads;
    for (int64_t r =
             static_cast<int64_t>(blockIdx.y) * kRowThreads + threadIdx.y;
         r < rows; r += step) {
      term(r, c, sums);
    }
  }
  for (int k = 0; k < kTerms; ++k) tile[k][threadIdx.y][threadIdx.x] = sums[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  for (int k = 0; k < kTerms; ++k) {
    double total = 0;
    for (int y = 0; y < kRowThreads; ++y) total += tile[k][y][threadIdx.x];
    partial[static_cast<int64_t>(blockIdx.y) * kTerms * cols + k * cols + c] =
        total;
  }
}

template <int kTerms, typename Term>
cudaError_t LaunchColumnParts(Term term, int64_t rows, int64_t cols,
                              double* partial, cudaStream_t stream) {
  const int64_t column_blocks = (cols + kColumnTile - 1) / kColumnTile;
  if (column_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(column_blocks),
                  static_cast<unsigned>(ColumnSumParts(rows)));
  ColumnPartsKernel<kTerms>
      <<<grid, dim3(kColumnTile, kRowThreads), 0, stream>>>(term, rows, cols,
                                                            partial);
  return cudaGetLastError();
}

// The sum over the parts of element `index` of rows `stride` long.
__device__ double SumParts(const double* partial, int64_t parts, int64_t stride,
                           int64_t index) {
  double total = 0;
  for (int64_t p = 0; p < parts; ++p) total += partial[p * stride + index];
  return total;
}

// ---------------------------------------------------------------------------
// Batch normalization.

struct SumTerm {
  const float* x;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t c, double* sums) const {
    sums[0] += x[r * cols + c];
  }
};

struct SquaredDeviationTerm {
  const float* x;
  int64_t cols;
  const double* mean;
  __device__ void operator()(int64_t r, int64_t c, double* sums) const {
    const double d = x[r * cols + c] - mean[c];
    sums[0] += d * d;
  }
};

// sum dy and sum dy * (x - mean), per channel.
struct BatchNormGradTerm {
  const float* x;
  const float* dy;
  int64_t cols;
  const float* mean;
  __device__ void operator()(int64_t r, int64_t c, double* sums) const {
    const int64_t i = r * cols + c;
    const double g = dy[i];
    sums[0] += g;
    sums[1] += g * (static_cast<double>(x[i]) - mean[c]);
  }
};

__global__ void MeanFinishKernel(const double* partial, int64_t parts,
                                 int64_t rows, int64_t cols, double* mean,
                                 float* mean_out) {
  for (int64_t c = FirstIndex(); c < cols; c += GridStride()) {
    const double m = SumParts(partial, parts, cols, c) / rows;
    mean[c] = m;
    mean_out[c] = static_cast<float>(m);
  }
}

__global__ void VarianceFinishKernel(const double* partial, int64_t parts,
                                     int64_t rows, int64_t cols,
                                     float* variance) {
  for (int64_t c = FirstIndex(); c < cols; c += GridStride()) {
    variance[c] = static_cast<float>(SumParts(partial, parts, cols, c) / rows);
  }
}

__device__ float InverseStd(float variance, float epsilon) {
  return 1.0f / sqrtf(variance + epsilon);
}

__global__ void BatchNormForwardKernel(const float* x, int64_t rows,
                                       int64_t cols, const float* mean,
                                       const float* variance, float epsilon,
                                       const float* gamma, const float* beta,
                                       float* y) {
  const int64_t n = rows * cols;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t c = i % cols;
    float v = (x[i] - mean[c]) * InverseStd(variance[c], epsilon);
    if (gamma != nullptr) v *= gamma[c];
    if (beta != nullptr) v += beta[c];
    y[i] = v;
  }
}

// From the parts of (sum dy, sum dy * (x - mean)): dbeta, dgamma and, for
// dx, coefficients[c] = dbeta / rows and coefficients[cols + c] =
// dgamma / rows.
__global__ void BatchNormGradFinishKernel(const double* partial, int64_t parts,
                                          int64_t rows, int64_t cols,
                                          const float* variance, float epsilon,
                                          double* coefficients, float* dgamma,
                                          float* dbeta) {
  for (int64_t c = FirstIndex(); c < cols; c += GridStride()) {
    const double sum_dy = SumParts(partial, parts, 2 * cols, c);
    const double inv_std =
        1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    const double sum_dy_xhat =
        SumParts(partial, parts, 2 * cols, cols + c) * inv_std;
    coefficients[c] = sum_dy / rows;
    coefficients[cols + c] = sum_dy_xhat / rows;
    if (dbeta != nullptr) dbeta[c] = static_cast<float>(sum_dy);
    if (dgamma != nullptr) dgamma[c] = static_cast<float>(sum_dy_xhat);
  }
}

__global__ void BatchNormBackwardDataKernel(
    const float* x, const float* dy, int64_t rows, int64_t cols,
    const float* mean, const float* variance, float epsilon, const float* gamma,
    const double* coefficients, float* dx) {
  const int64_t n = rows * cols;
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const int64_t c = i % cols;
    const float inv_std = InverseStd(variance[c], epsilon);
    const float xhat = (x[i] - mean[c]) * inv_std;
    const float scale = gamma != nullptr ? gamma[c] * inv_std : inv_std;
    dx[i] = scale * (dy[i] - static_cast<float>(coefficients[c]) -
                     xhat * static_cast<float>(coefficients[cols + c]));
  }
}

__global__ void ScaleKernel(const float* in, int64_t n, float scale,
                            float* out) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    out[i] = in[i] * scale;
  }
}

// ---------------------------------------------------------------------------
// Layer normalization: one block per row, blockDim.x a multiple of 32.

// The sum of v over the block, in a fixed order, returned to every thread.
// shared: 32 doubles.
__device__ double BlockSum(double v, double* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = 0;
  const int warps = blockDim.x >> 5;
  for (int w = 0; w < warps; ++w) total += shared[w];
  __syncthreads();  // Before shared is written again.
  return total;
}

// Threads per row-block for a row of `width`: the smallest multiple of 32
// (up to kThreads) that covers it.
int RowThreads(int64_t width) {
  int threads = 32;
  while (threads < kThreads && threads < width) threads *= 2;
  return threads;
}

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
}

__global__ void LayerNormForwardKernel(const float* x, int64_t rows,
                                       int64_t width, float epsilon,
                                       const float* gamma, const float* beta,
                                       float* y, float* mean_out,
                                       float* variance_out) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * width;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) sum += xr[i];
    const double mean = BlockSum(sum, shared) / width;
    double squares = 0;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const double d = xr[i] - mean;
      squares += d * d;
    }
    const float variance =
        static_cast<float>(BlockSum(squares, shared) / width);
    const float mean_f = static_cast<float>(mean);
    if (threadIdx.x == 0) {
      mean_out[r] = mean_f;
      variance_out[r] = variance;
    }
    const float inv_std = InverseStd(variance, epsilon);
    float* yr = y + r * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      float v = (xr[i] - mean_f) * inv_std;
      if (gamma != nullptr) v *= gamma[i];
      if (beta != nullptr) v += beta[i];
      yr[i] = v;
    }
  }
}

// g = dy * gamma is rounded on its own (__fmul_rn: never fused into an
// FMA), so that both loops see the same g and a row whose xhat is 0 (width
// 1) gets dx exactly 0, as on the CPU.
__global__ void LayerNormBackwardDataKernel(const float* x, const float* dy,
                                            int64_t rows, int64_t width,
                                            const float* mean,
                                            const float* variance,
                                            float epsilon, const float* gamma,
                                            float* dx) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * width;
    const float* dyr = dy + r * width;
    const float m = mean[r];
    const float inv_std = InverseStd(variance[r], epsilon);
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const float g = gamma != nullptr ? __fmul_rn(dyr[i], gamma[i]) : dyr[i];
      sum_g += g;
      sum_g_xhat += static_cast<double>(g) * ((xr[i] - m) * inv_std);
    }
    const float mean_g = static_cast<float>(BlockSum(sum_g, shared) / width);
    const float mean_g_xhat =
        static_cast<float>(BlockSum(sum_g_xhat, shared) / width);
    float* dxr = dx + r * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const float g = gamma != nullptr ? __fmul_rn(dyr[i], gamma[i]) : dyr[i];
      const float xhat = (xr[i] - m) * inv_std;
      dxr[i] = (g - mean_g - xhat * mean_g_xhat) * inv_std;
    }
  }
}

// sum dy and sum dy * xhat, per feature, xhat with the row's statistics.
struct LayerNormParamTerm {
  const float* x;
  const float* dy;
  int64_t cols;
  const float* mean;
  const float* variance;
  float epsilon;
  __device__ void operator()(int64_t r, int64_t c, double* sums) const {
    const int64_t i = r * cols + c;
    const double g = dy[i];
    sums[0] += g;
    sums[1] += g * ((x[i] - mean[r]) * InverseStd(variance[r], epsilon));
  }
};

__global__ void LayerNormParamFinishKernel(const double* partial, int64_t parts,
                                           int64_t cols, float* dgamma,
                                           float* dbeta) {
  for (int64_t c = FirstIndex(); c < cols; c += GridStride()) {
    if (dbeta != nullptr) {
      dbeta[c] = static_cast<float>(SumParts(partial, parts, 2 * cols, c));
    }
    if (dgamma != nullptr) {
      dgamma[c] =
          static_cast<float>(SumParts(partial, parts, 2 * cols, cols + c));
    }
  }
}

// ---------------------------------------------------------------------------
// Attention.

__global__ void SplitHeadsKernel(const float* in, const float* bias,
                                 int64_t batch, int64_t steps, int64_t heads,
                                 int64_t dim, float* out) {
  const int64_t n = batch * steps * heads * dim;
  for (int64_t o = FirstIndex(); o < n; o += GridStride()) {
    const int64_t d = o % dim;
    const int64_t t = (o / dim) % steps;
    const int64_t h = (o / (dim * steps)) % heads;
    const int64_t b = o / (dim * steps * heads);
    float v = in[((b * steps + t) * heads + h) * dim + d];
    if (bias != nullptr) v += bias[h * dim + d];
    out[o] = v;
  }
}

__global__ void MergeHeadsKernel(const float* in, int64_t batch, int64_t steps,
                                 int64_t heads, int64_t dim, float* out) {
  const int64_t n = batch * steps * heads * dim;
  for (int64_t o = FirstIndex(); o < n; o += GridStride()) {
    const int64_t d = o % dim;
    const int64_t h = (o / dim) % heads;
    const int64_t t = (o / (dim * heads)) % steps;
    const int64_t b = o / (dim * heads * steps);
    out[o] = in[((b * heads + h) * steps + t) * dim + d];
  }
}

constexpr int kWarpsPerBlock = kThreads / 32;

__device__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// The same total in every lane (butterfly: a fixed order per lane).
__device__ double WarpSum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// One warp per row.
__global__ void AttentionSoftmaxKernel(float* scores, int64_t rows, int64_t tq,
                                       int64_t tv, bool causal) {
  const int lane = threadIdx.x & 31;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = first; row < rows; row += step) {
    float* s = scores + row * tv;
    const int64_t i = row % tq;
    const int64_t kept = causal && i + 1 < tv ? i + 1 : tv;
    float max = -INFINITY;
    for (int64_t j = lane; j < kept; j += 32) max = fmaxf(max, s[j]);
    max = WarpMax(max);
    double sum = 0;
    for (int64_t j = lane; j < kept; j += 32) {
      const float e = expf(s[j] - max);
      s[j] = e;
      sum += e;
    }
    const float total = static_cast<float>(WarpSum(sum));
    for (int64_t j = lane; j < kept; j += 32) s[j] = s[j] / total;
    for (int64_t j = kept + lane; j < tv; j += 32) s[j] = 0.0f;
  }
}

__global__ void AttentionSoftmaxBackwardKernel(const float* p, int64_t rows,
                                               int64_t tv, float* d) {
  const int lane = threadIdx.x & 31;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = first; row < rows; row += step) {
    const float* pr = p + row * tv;
    float* dr = d + row * tv;
    double dot = 0;
    for (int64_t j = lane; j < tv; j += 32) {
      dot += static_cast<double>(dr[j]) * pr[j];
    }
    const float total = static_cast<float>(WarpSum(dot));
    for (int64_t j = lane; j < tv; j += 32) dr[j] = pr[j] * (dr[j] - total);
  }
}

unsigned WarpRowBlocks(int64_t rows) {
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(blocks < kMaxRowBlocks ? blocks : kMaxRowBlocks);
}

}  // namespace

int64_t ColumnSumParts(int64_t rows) {
  const int64_t per_part = kRowThreads * kRowsPerThread;
  const int64_t parts = (rows + per_part - 1) / per_part;
  if (parts < 1) return 1;
  return parts < kMaxParts ? parts : kMaxParts;
}

int64_t ColumnSumScratch(int64_t rows, int64_t cols) {
  return ColumnSumParts(rows) * cols;
}

cudaError_t LaunchBatchNormStatistics(const float* x, int64_t rows,
                                      int64_t channels, double* scratch,
                                      float* mean, float* variance,
                                      cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return cudaErrorInvalidValue;
  const int64_t parts = ColumnSumParts(rows);
  double* partial = scratch;
  double* mean_double = scratch + ColumnSumScratch(rows, channels);
  cudaError_t error = LaunchColumnParts<1>(SumTerm{x, channels}, rows, channels,
                                           partial, stream);
  if (error != cudaSuccess) return error;
  MeanFinishKernel<<<BlocksFor(channels), kThreads, 0, stream>>>(
      partial, parts, rows, channels, mean_double, mean);
  error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  error = LaunchColumnParts<1>(SquaredDeviationTerm{x, channels, mean_double},
                               rows, channels, partial, stream);
  if (error != cudaSuccess) return error;
  VarianceFinishKernel<<<BlocksFor(channels), kThreads, 0, stream>>>(
      partial, parts, rows, channels, variance);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormForward(const float* x, int64_t rows,
                                   int64_t channels, const float* mean,
                                   const float* variance, float epsilon,
                                   const float* gamma, const float* beta,
                                   float* y, cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return cudaErrorInvalidValue;
  BatchNormForwardKernel<<<BlocksFor(rows * channels), kThreads, 0, stream>>>(
      x, rows, channels, mean, variance, epsilon, gamma, beta, y);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormBackward(const float* x, const float* dy,
                                    int64_t rows, int64_t channels,
                                    const float* mean, const float* variance,
                                    float epsilon, const float* gamma,
                                    double* scratch, float* dx, float* dgamma,
                                    float* dbeta, cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return cudaErrorInvalidValue;
  double* partial = scratch;
  double* coefficients = scratch + ColumnSumScratch(rows, 2 * channels);
  cudaError_t error =
      LaunchColumnParts<2>(BatchNormGradTerm{x, dy, channels, mean}, rows,
                           channels, partial, stream);
  if (error != cudaSuccess) return error;
  BatchNormGradFinishKernel<<<BlocksFor(channels), kThreads, 0, stream>>>(
      partial, ColumnSumParts(rows), rows, channels, variance, epsilon,
      coefficients, dgamma, dbeta);
  error = cudaGetLastError();
  if (error != cudaSuccess || dx == nullptr) return error;
  BatchNormBackwardDataKernel<<<BlocksFor(rows * channels), kThreads, 0,
                                stream>>>(x, dy, rows, channels, mean, variance,
                                          epsilon, gamma, coefficients, dx);
  return cudaGetLastError();
}

cudaError_t LaunchScale(const float* in, int64_t n, float scale, float* out,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, n, scale, out);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormForward(const float* x, int64_t rows, int64_t width,
                                   float epsilon, const float* gamma,
                                   const float* beta, float* y, float* mean,
                                   float* variance, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaErrorInvalidValue;
  LayerNormForwardKernel<<<RowBlocks(rows), RowThreads(width), 0, stream>>>(
      x, rows, width, epsilon, gamma, beta, y, mean, variance);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormBackwardData(const float* x, const float* dy,
                                        int64_t rows, int64_t width,
                                        const float* mean,
                                        const float* variance, float epsilon,
                                        const float* gamma, float* dx,
                                        cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaErrorInvalidValue;
  LayerNormBackwardDataKernel<<<RowBlocks(rows), RowThreads(width), 0,
                                stream>>>(x, dy, rows, width, mean, variance,
                                          epsilon, gamma, dx);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormBackwardParams(const float* x, const float* dy,
                                          int64_t rows, int64_t width,
                                          const float* mean,
                                          const float* variance, float epsilon,
                                          double* scratch, float* dgamma,
                                          float* dbeta, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaErrorInvalidValue;
  if (dgamma == nullptr && dbeta == nullptr) return cudaSuccess;
  cudaError_t error = LaunchColumnParts<2>(
      LayerNormParamTerm{x, dy, width, mean, variance, epsilon}, rows, width,
      scratch, stream);
  if (error != cudaSuccess) return error;
  LayerNormParamFinishKernel<<<BlocksFor(width), kThreads, 0, stream>>>(
      scratch, ColumnSumParts(rows), width, dgamma, dbeta);
  return cudaGetLastError();
}

cudaError_t LaunchSplitHeads(const float* in, const float* bias, int64_t batch,
                             int64_t steps, int64_t heads, int64_t dim,
                             float* out, cudaStream_t stream) {
  const int64_t n = batch * steps * heads * dim;
  if (n <= 0) return cudaSuccess;
  SplitHeadsKernel<<<BlocksFor(n), kThreads, 0, stream>>>(
      in, bias, batch, steps, heads, dim, out);
  return cudaGetLastError();
}

cudaError_t LaunchMergeHeads(const float* in, int64_t batch, int64_t steps,
                             int64_t heads, int64_t dim, float* out,
                             cudaStream_t stream) {
  const int64_t n = batch * steps * heads * dim;
  if (n <= 0) return cudaSuccess;
  MergeHeadsKernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, batch, steps,
                                                          heads, dim, out);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionSoftmax(float* scores, int64_t blocks, int64_t tq,
                                   int64_t tv, bool causal,
                                   cudaStream_t stream) {
  const int64_t rows = blocks * tq;
  if (rows <= 0 || tv <= 0) return cudaSuccess;
  AttentionSoftmaxKernel<<<WarpRowBlocks(rows), kThreads, 0, stream>>>(
      scores, rows, tq, tv, causal);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionSoftmaxBackward(const float* p, int64_t rows,
                                           int64_t tv, float* d,
                                           cudaStream_t stream) {
  if (rows <= 0 || tv <= 0) return cudaSuccess;
  AttentionSoftmaxBackwardKernel<<<WarpRowBlocks(rows), kThreads, 0, stream>>>(
      p, rows, tv, d);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
