// The kernels of graph_kernels.h. Grid-stride loops over 256-thread blocks;
// the per-element arithmetic follows the CPU op each kernel names.
#include "compute/gpu/graph_kernels.h"
#include "compute/gpu/kernel_grid.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

// BlocksFor(n), but at least one block (for n = 0 too).
int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(
      blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

#define PSTRAIN_GRID_LOOP(i, n) \
  for (int64_t i = FirstIndex(); i < (n); i += GridStride())

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluScale = 1.0507009873554805f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ float PointwiseValue(const PointwiseParams& p, float x) {
  switch (p.kind) {
    case PointwiseActivation::kKerasRelu:
      if (x <= p.threshold) return p.negative_slope * (x - p.threshold);
      return p.max_value > 0 ? fminf(x, p.max_value) : x;
    case PointwiseActivation::kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    case PointwiseActivation::kGeluTanh:
      return 0.5f * x *
             (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
    case PointwiseActivation::kSigmoid:
      return Sigmoid(x);
    case PointwiseActivation::kHardSigmoid:
      return fminf(fmaxf(p.alpha * x + 0.5f, 0.0f), 1.0f);
    case PointwiseActivation::kTanh:
      return tanhf(x);
    case PointwiseActivation::kSilu:
      return x * Sigmoid(x);
    case PointwiseActivation::kElu:
      return x > 0 ? x : p.alpha * expm1f(x);
    case PointwiseActivation::kSelu:
      return kSeluScale * (x > 0 ? x : kSeluAlpha * expm1f(x));
    case PointwiseActivation::kSoftplus:
      return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
  }
  return x;
}

__device__ float PointwiseGrad(const PointwiseParams& p, float x, float y) {
  switch (p.kind) {
    case PointwiseActivation::kKerasRelu:
      if (x <= p.threshold) return p.negative_slope;
      return p.max_value > 0 && x >= p.max_value ? 0.0f : 1.0f;
    case PointwiseActivation::kGelu: {
      const float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
      return 0.5f * (1.0f + erff(x * 0.7071067811865476f)) + x * pdf;
    }
    case PointwiseActivation::kGeluTanh: {
      const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
      const float t = tanhf(inner);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi *
                                     (1.0f + 3.0f * kGeluCubic * x * x);
    }
    case PointwiseActivation::kSigmoid:
      return y * (1.0f - y);
    case PointwiseActivation::kHardSigmoid: {
      const float z = p.alpha * x + 0.5f;
      return z > 0.0f && z < 1.0f ? p.alpha : 0.0f;
    }
    case PointwiseActivation::kTanh:
      return 1.0f - y * y;
    case PointwiseActivation::kSilu: {
      const float s = Sigmoid(x);
      return s + x * s * (1.0f - s);
    }
    case PointwiseActivation::kElu:
      return x > 0 ? 1.0f : p.alpha * expf(x);
    case PointwiseActivation::kSelu:
      return kSeluScale * (x > 0 ? 1.0f : kSeluAlpha * expf(x));
    case PointwiseActivation::kSoftplus:
      return Sigmoid(x);
  }
  return 1.0f;
}

__global__ void AccumulateKernel(const float* add, int64_t n, float* sum) {
  PSTRAIN_GRID_LOOP(i, n) { sum[i] += add[i]; }
}

__global__ void ScaleShiftKernel(const float* x, int64_t n, float scale,
                                 float offset, float* y) {
  PSTRAIN_GRID_LOOP(i, n) { y[i] = x[i] * scale + offset; }
}

__global__ void PointwiseForwardKernel(PointwiseParams p, const float* x,
                                       int64_t n, float* y) {
  PSTRAIN_GRID_LOOP(i, n) { y[i] = PointwiseValue(p, x[i]); }
}

__global__ void PointwiseBackwardKernel(PointwiseParams p, const float* x,
                                        const float* y, const float* dy,
                                        int64_t n, float* dx) {
  PSTRAIN_GRID_LOOP(i, n) { dx[i] = dy[i] * PointwiseGrad(p, x[i], y[i]); }
}

// One thread per (outer, inner) line along the axis.
__global__ void AxisSoftmaxForwardKernel(const float* x, int64_t outer,
                                         int64_t len, int64_t inner, bool log,
                                         float* y) {
  PSTRAIN_GRID_LOOP(line, outer * inner) {
    const int64_t o = line / inner, in = line % inner;
    const float* xs = x + o * len * inner + in;
    float* ys = y + o * len * inner + in;
    float max = xs[0];
    for (int64_t k = 1; k < len; ++k) max = fmaxf(max, xs[k * inner]);
    double sum = 0;
    for (int64_t k = 0; k < len; ++k) sum += expf(xs[k * inner] - max);
    if (!log) {
      const float scale = static_cast<float>(1.0 / sum);
      for (int64_t k = 0; k < len; ++k) {
        ys[k * inner] = expf(xs[k * inner] - max) * scale;
      }
    } else {
      const float log_sum = static_cast<float>(::log(sum)) + max;
      for (int64_t k = 0; k < len; ++k) ys[k * inner] = xs[k * inner] - log_sum;
    }
  }
}

__global__ void AxisSoftmaxBackwardKernel(const float* y, const float* dy,
                                          int64_t outer, int64_t len,
                                          int64_t inner, bool log, float* dx) {
  PSTRAIN_GRID_LOOP(line, outer * inner) {
    const int64_t base = (line / inner) * len * inner + line % inner;
    double dot = 0;
    for (int64_t k = 0; k < len; ++k) {
      const int64_t i = base + k * inner;
      dot += log ? dy[i] : dy[i] * y[i];
    }
    const float d = static_cast<float>(dot);
    for (int64_t k = 0; k < len; ++k) {
      const int64_t i = base + k * inner;
      dx[i] = log ? dy[i] - expf(y[i]) * d : y[i] * (dy[i] - d);
    }
  }
}

__global__ void MergeForwardKernel(MergeKind op, MergeInputs in, int64_t n,
                                   float* y) {
  PSTRAIN_GRID_LOOP(i, n) {
    float v = in.x[0][i];
    for (int j = 1; j < in.count; ++j) {
      const float xj = in.x[j][i];
      switch (op) {
        case MergeKind::kAdd:
        case MergeKind::kAverage:
          v += xj;
          break;
        case MergeKind::kSubtract:
          v -= xj;
          break;
        case MergeKind::kMultiply:
          v *= xj;
          break;
        case MergeKind::kMaximum:
          v = fmaxf(v, xj);
          break;
        case MergeKind::kMinimum:
          v = fminf(v, xj);
          break;
      }
    }
    y[i] = op == MergeKind::kAverage ? v / static_cast<float>(in.count) : v;
  }
}

__global__ void MergeBackwardKernel(MergeKind op, MergeInputs in,
                                    const float* dy, int64_t n, int which,
                                    float* dx) {
  PSTRAIN_GRID_LOOP(i, n) {
    float g = dy[i];
    switch (op) {
      case MergeKind::kAdd:
        break;
      case MergeKind::kAverage:
        g /= static_cast<float>(in.count);
        break;
      case MergeKind::kSubtract:
        if (which == 1) g = -g;
        break;
      case MergeKind::kMultiply:
        for (int j = 0; j < in.count; ++j) {
          if (j != which) g *= in.x[j][i];
        }
        break;
      case MergeKind::kMaximum:
      case MergeKind::kMinimum: {
        int best = 0;
        for (int j = 1; j < in.count; ++j) {
          const bool better = op == MergeKind::kMaximum
                                  ? in.x[j][i] > in.x[best][i]
                                  : in.x[j][i] < in.x[best][i];
          if (better) best = j;
        }
        if (best != which) g = 0;
        break;
      }
    }
    dx[i] = g;
  }
}

__global__ void PermuteKernel(const float* x, int64_t total, PermuteGeometry g,
                              float* y) {
  PSTRAIN_GRID_LOOP(i, total) {
    const int64_t b = i / g.per_example;
    int64_t rest = i % g.per_example;
    int64_t from = 0;
    for (int a = g.rank - 1; a >= 0; --a) {
      from += (rest % g.out_dims[a]) * g.in_strides[a];
      rest /= g.out_dims[a];
    }
    y[i] = x[b * g.per_example + from];
  }
}

// The window of output (oh, ow): its first row and column (may be
// negative) and the number of input elements it covers.
__device__ int64_t WindowCount(const AvgPoolGeometry& g, int64_t oh,
                               int64_t ow) {
  const int64_t h0 = oh * g.stride_h - g.pad_top;
  const int64_t w0 = ow * g.stride_w - g.pad_left;
  const int64_t h1 = min(h0 + g.pool_h, g.height),
                w1 = min(w0 + g.pool_w, g.width);
  return (h1 - max(h0, int64_t{0})) * (w1 - max(w0, int64_t{0}));
}

__global__ void AvgPoolForwardKernel(const float* x, AvgPoolGeometry g,
                                     float* y) {
  const int64_t total = g.batch * g.out_height * g.out_width * g.channels;
  PSTRAIN_GRID_LOOP(i, total) {
    const int64_t c = i % g.channels;
    const int64_t ow = (i / g.channels) % g.out_width;
    const int64_t oh = (i / (g.channels * g.out_width)) % g.out_height;
    const int64_t n = i / (g.channels * g.out_width * g.out_height);
    const int64_t h0 = oh * g.stride_h - g.pad_top;
    const int64_t w0 = ow * g.stride_w - g.pad_left;
    float sum = 0;
    for (int64_t h = max(h0, int64_t{0}); h < min(h0 + g.pool_h, g.height);
         ++h) {
      for (int64_t w = max(w0, int64_t{0}); w < min(w0 + g.pool_w, g.width);
           ++w) {
        sum += x[((n * g.height + h) * g.width + w) * g.channels + c];
      }
    }
    y[i] = sum / static_cast<float>(WindowCount(g, oh, ow));
  }
}

// The outputs whose windows (start o * stride - pad, width pool) cover
// input position p: [first, last], clipped to [0, out).
__device__ void Covering(int64_t p, int64_t stride, int64_t pad, int64_t pool,
                         int64_t out, int64_t* first, int64_t* last) {
  // o * stride - pad <= p  and  o * stride - pad + pool > p.
  const int64_t lo = p + pad - pool + 1;  // o * stride >= lo.
  *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  *last = min((p + pad) / stride, out - 1);
}

__global__ void AvgPoolBackwardKernel(const float* dy, AvgPoolGeometry g,
                                      float* dx) {
  const int64_t total = g.batch * g.height * g.width * g.channels;
  PSTRAIN_GRID_LOOP(i, total) {
    const int64_t c = i % g.channels;
    const int64_t w = (i / g.channels) % g.width;
    const int64_t h = (i / (g.channels * g.width)) % g.height;
    const int64_t n = i / (g.channels * g.width * g.height);
    int64_t oh0, oh1, ow0, ow1;
    Covering(h, g.stride_h, g.pad_top, g.pool_h, g.out_height, &oh0, &oh1);
    Covering(w, g.stride_w, g.pad_left, g.pool_w, g.out_width, &ow0, &ow1);
    float sum = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        sum +=
            dy[((n * g.out_height + oh) * g.out_width + ow) * g.channels + c] /
            static_cast<float>(WindowCount(g, oh, ow));
      }
    }
    dx[i] = sum;
  }
}

__global__ void GlobalPoolForwardKernel(const float* x, int64_t batch,
                                        int64_t steps, int64_t channels,
                                        bool max, float* y) {
  PSTRAIN_GRID_LOOP(i, batch * channels) {
    const int64_t b = i / channels, c = i % channels;
    const float* xs = x + b * steps * channels + c;
    if (max) {
      float best = xs[0];
      for (int64_t s = 1; s < steps; ++s) {
        if (xs[s * channels] > best) best = xs[s * channels];
      }
      y[i] = best;
    } else {
      double sum = 0;
      for (int64_t s = 0; s < steps; ++s) sum += xs[s * channels];
      y[i] = static_cast<float>(sum / steps);
    }
  }
}

__global__ void GlobalPoolBackwardKernel(const float* x, const float* y,
                                         const float* dy, int64_t batch,
                                         int64_t steps, int64_t channels,
                                         bool max, float* dx) {
  PSTRAIN_GRID_LOOP(i, batch * channels) {
    const int64_t b = i / channels, c = i % channels;
    const float* xs = x + b * steps * channels + c;
    float* dxs = dx + b * steps * channels + c;
    if (max) {
      int64_t first = 0;
      while (first < steps - 1 && !(xs[first * channels] == y[i])) ++first;
      for (int64_t s = 0; s < steps; ++s) {
        dxs[s * channels] = s == first ? dy[i] : 0.0f;
      }
    } else {
      const float g = dy[i] * static_cast<float>(1.0 / steps);
      for (int64_t s = 0; s < steps; ++s) dxs[s * channels] = g;
    }
  }
}

}  // namespace

cudaError_t LaunchAccumulate(const float* add, int64_t n, float* sum,
                             cudaStream_t stream) {
  AccumulateKernel<<<Blocks(n), kThreads, 0, stream>>>(add, n, sum);
  return cudaGetLastError();
}

cudaError_t LaunchScaleShift(const float* x, int64_t n, float scale,
                             float offset, float* y, cudaStream_t stream) {
  ScaleShiftKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, scale, offset, y);
  return cudaGetLastError();
}

cudaError_t LaunchPointwiseForward(const PointwiseParams& params,
                                   const float* x, int64_t n, float* y,
                                   cudaStream_t stream) {
  PointwiseForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(params, x, n, y);
  return cudaGetLastError();
}

cudaError_t LaunchPointwiseBackward(const PointwiseParams& params,
                                    const float* x, const float* y,
                                    const float* dy, int64_t n, float* dx,
                                    cudaStream_t stream) {
  PointwiseBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(params, x, y, dy,
                                                              n, dx);
  return cudaGetLastError();
}

cudaError_t LaunchAxisSoftmaxForward(const float* x, int64_t outer,
                                     int64_t axis, int64_t inner, bool log,
                                     float* y, cudaStream_t stream) {
  AxisSoftmaxForwardKernel<<<Blocks(outer * inner), kThreads, 0, stream>>>(
      x, outer, axis, inner, log, y);
  return cudaGetLastError();
}

cudaError_t LaunchAxisSoftmaxBackward(const float* y, const float* dy,
                                      int64_t outer, int64_t axis,
                                      int64_t inner, bool log, float* dx,
                                      cudaStream_t stream) {
  AxisSoftmaxBackwardKernel<<<Blocks(outer * inner), kThreads, 0, stream>>>(
      y, dy, outer, axis, inner, log, dx);
  return cudaGetLastError();
}

cudaError_t LaunchMergeForward(MergeKind op, const MergeInputs& inputs,
                               int64_t n, float* y, cudaStream_t stream) {
  MergeForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(op, inputs, n, y);
  return cudaGetLastError();
}

cudaError_t LaunchMergeBackward(MergeKind op, const MergeInputs& inputs,
                                const float* dy, int64_t n, int which,
                                float* dx, cudaStream_t stream) {
  MergeBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(op, inputs, dy, n,
                                                          which, dx);
  return cudaGetLastError();
}

cudaError_t LaunchPermute(const float* x, int64_t batch,
                          const PermuteGeometry& g, float* y,
                          cudaStream_t stream) {
  const int64_t total = batch * g.per_example;
  PermuteKernel<<<Blocks(total), kThreads, 0, stream>>>(x, total, g, y);
  return cudaGetLastError();
}

cudaError_t LaunchAvgPoolForward(const float* x, const AvgPoolGeometry& g,
                                 float* y, cudaStream_t stream) {
  const int64_t total = g.batch * g.out_height * g.out_width * g.channels;
  AvgPoolForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(x, g, y);
  return cudaGetLastError();
}

cudaError_t LaunchAvgPoolBackward(const float* dy, const AvgPoolGeometry& g,
                                  float* dx, cudaStream_t stream) {
  const int64_t total = g.batch * g.height * g.width * g.channels;
  AvgPoolBackwardKernel<<<Blocks(total), kThreads, 0, stream>>>(dy, g, dx);
  return cudaGetLastError();
}

cudaError_t LaunchGlobalPoolForward(const float* x, int64_t batch,
                                    int64_t steps, int64_t channels, bool max,
                                    float* y, cudaStream_t stream) {
  GlobalPoolForwardKernel<<<Blocks(batch * channels), kThreads, 0, stream>>>(
      x, batch, steps, channels, max, y);
  return cudaGetLastError();
}

cudaError_t LaunchGlobalPoolBackward(const float* x, const float* y,
                                     const float* dy, int64_t batch,
                                     int64_t steps, int64_t channels, bool max,
                                     float* dx, cudaStream_t stream) {
  GlobalPoolBackwardKernel<<<Blocks(batch * channels), kThreads, 0, stream>>>(
      x, y, dy, batch, steps, channels, max, dx);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
