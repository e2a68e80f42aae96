// The arithmetic of pstrain's own CUDA kernels, per element or per row,
// written once for both compilers: nvcc compiles it into the kernels
// (kernels.cu, where each thread calls one of these functions), and the host
// compiler into kernel_math_test, which checks it against the CPU ops
// (compute/cpu) on a machine without a GPU. Only the launch (which thread
// handles which index) and BiasGradKernel's reduction are not covered there.
//
// Plain C++ with <math.h> and <stdint.h> only: a .cu file may include nothing
// else of ours (no Abseil).
//
//   Philox4 words = DropoutWords(block, seed, step);  // as compute/cpu/dropout
//   double loss = SoftmaxCrossEntropyRow(row, label, classes, grad_row);
#ifndef PSTRAIN_COMPUTE_GPU_KERNEL_MATH_H_
#define PSTRAIN_COMPUTE_GPU_KERNEL_MATH_H_

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define PSTRAIN_HOST_DEVICE __host__ __device__
#else
#define PSTRAIN_HOST_DEVICE
#endif

namespace pstrain {
namespace worker {
namespace gpu {

// ---------------------------------------------------------------------------
// Philox4x32-10 and dropout.

struct Philox4 {
  uint32_t word[4];
};

// Philox4x32-10 of (counter, key): the same constants and rounds as
// compute/cpu/philox.h (copied, since device code cannot call that header's
// std::array function); kernel_math_test checks both give equal words.
PSTRAIN_HOST_DEVICE inline Philox4 Philox4x32(uint32_t c0, uint32_t c1,
                                              uint32_t c2, uint32_t c3,
                                              uint32_t k0, uint32_t k1) {
  const uint64_t kMul0 = 0xD2511F53u;
  const uint64_t kMul1 = 0xCD9E8D57u;
  const uint32_t kWeyl0 = 0x9E3779B9u;
  const uint32_t kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint64_t p0 = kMul0 * c0;
    const uint64_t p1 = kMul1 * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  Philox4 out = {{c0, c1, c2, c3}};
  return out;
}

// The four uniform words of dropout elements 4 * block .. 4 * block + 3 for
// (seed, step), exactly as compute/cpu/dropout.h defines them: counter
// {lo(block), hi(block), lo(step), hi(step)}, key {lo(seed), hi(seed)}.
PSTRAIN_HOST_DEVICE inline Philox4 DropoutWords(uint64_t block, uint64_t seed,
                                                uint64_t step) {
  return Philox4x32(
      static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
      static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Dropout forward for the elements of Philox block `block` (global element
// indices 4 * block .. 4 * block + 3) that lie in this call's range
// [offset, offset + n): element i = e - offset keeps x[i] * scale iff its
// word >= threshold, else becomes 0; mask[i] records 1 or 0. One call per
// block, so each Philox evaluation serves four elements. x == y allowed.
PSTRAIN_HOST_DEVICE inline void DropoutForwardBlock(
    uint64_t block, const float* x, uint64_t n, uint64_t offset, uint64_t seed,
    uint64_t step, uint64_t threshold, float scale, uint8_t* mask, float* y) {
  const Philox4 words = DropoutWords(block, seed, step);
  for (int lane = 0; lane < 4; ++lane) {
    const uint64_t e = block * 4 + lane;
    if (e < offset || e - offset >= n) continue;
    const uint64_t i = e - offset;
    const bool keep = words.word[lane] >= threshold;
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : 0.0f;
  }
}

// ---------------------------------------------------------------------------
// Losses, one row (example) at a time, in double like compute/cpu/losses.cc.

// -log(softmax(row)[label]) by log-sum-exp; when grad is not null,
// grad = softmax(row) - onehot(label). REQUIRES: 0 <= label < classes.
PSTRAIN_HOST_DEVICE inline double SoftmaxCrossEntropyRow(const float* row,
                                                         int32_t label,
                                                         int64_t classes,
                                                         float* grad) {
  float max_value = row[0];
  for (int64_t j = 1; j < classes; ++j) {
    if (max_value < row[j]) max_value = row[j];
  }
  const double max = max_value;
  double sum_exp = 0;
  for (int64_t j = 0; j < classes; ++j) sum_exp += exp(row[j] - max);
  const double log_sum_exp = max + log(sum_exp);
  if (grad != nullptr) {
    for (int64_t j = 0; j < classes; ++j) {
      grad[j] = static_cast<float>(exp(row[j] - log_sum_exp));
    }
    grad[label] -= 1.0f;
  }
  return log_sum_exp - row[label];
}

// std::clamp's semantics (a NaN stays NaN), usable in device code.
PSTRAIN_HOST_DEVICE inline float ClampFloat(float v, float low, float high) {
  return v < low ? low : (high < v ? high : v);
}

// Keras's sparse cross-entropy from probabilities for one row: probabilities
// clipped to [low, high], loss -log(c[label] / sum_j c[j]); when grad is not
// null, grad[j] = 1 / sum - [j == label] / c[label] where low <= p[j] <= high,
// else 0. REQUIRES: 0 <= label < classes.
PSTRAIN_HOST_DEVICE inline double CrossEntropyFromProbabilitiesRow(
    const float* row, int32_t label, int64_t classes, float low, float high,
    float* grad) {
  double sum = 0;
  for (int64_t j = 0; j < classes; ++j) sum += ClampFloat(row[j], low, high);
  const double clipped_label = ClampFloat(row[label], low, high);
  if (grad != nullptr) {
    for (int64_t j = 0; j < classes; ++j) {
      if (!(row[j] >= low && row[j] <= high)) {
        grad[j] = 0.0f;
        continue;
      }
      double g = 1.0 / sum;
      if (j == label) g -= 1.0 / clipped_label;
      grad[j] = static_cast<float>(g);
    }
  }
  return log(sum) - log(clipped_label);
}

// The elementwise regression losses' loop: sum_j f.Value(e_j) for one row,
// e_j = p[j] - t[j] (not yet divided by `outputs`); when grad is not null,
// grad[j] = f.Derivative(e_j) / outputs.
template <typename F>
PSTRAIN_HOST_DEVICE inline double ErrorRow(const float* predictions,
                                           const float* targets,
                                           int64_t outputs, const F& f,
                                           float* grad) {
  double total = 0;
  for (int64_t j = 0; j < outputs; ++j) {
    const double e = static_cast<double>(predictions[j]) - targets[j];
    total += f.Value(e);
    if (grad != nullptr) {
      grad[j] = static_cast<float>(f.Derivative(e) / outputs);
    }
  }
  return total;
}

struct SquaredError {
  PSTRAIN_HOST_DEVICE double Value(double e) const { return e * e; }
  PSTRAIN_HOST_DEVICE double Derivative(double e) const { return 2.0 * e; }
};

// sum_j (p[j] - t[j])^2 for one row (not yet divided by `outputs`); when
// grad is not null, grad[j] = 2 (p[j] - t[j]) / outputs.
PSTRAIN_HOST_DEVICE inline double SquaredErrorRow(const float* predictions,
                                                  const float* targets,
                                                  int64_t outputs,
                                                  float* grad) {
  return ErrorRow(predictions, targets, outputs, SquaredError(), grad);
}

// Index of the first maximum of row[0, classes), as std::max_element.
PSTRAIN_HOST_DEVICE inline int64_t ArgMaxRow(const float* row,
                                             int64_t classes) {
  int64_t best = 0;
  for (int64_t j = 1; j < classes; ++j) {
    if (row[best] < row[j]) best = j;
  }
  return best;
}

// ---------------------------------------------------------------------------
// Layout: padding, cropping and transposing.

// NHWC geometry of an input [n, height, width, channels] placed at
// (top, left) inside a larger [n, padded_height, padded_width, channels].
struct PadGeometry {
  int64_t height;
  int64_t width;
  int64_t channels;
  int64_t top;
  int64_t left;
  int64_t padded_height;
  int64_t padded_width;
};

// For element p of the padded tensor: the index of the input element it
// copies, or -1 where it is padding.
PSTRAIN_HOST_DEVICE inline int64_t PadSourceIndex(int64_t p,
                                                  const PadGeometry& g) {
  const int64_t c = p % g.channels;
  int64_t rest = p / g.channels;
  const int64_t pw = rest % g.padded_width;
  rest /= g.padded_width;
  const int64_t ph = rest % g.padded_height;
  const int64_t n = rest / g.padded_height;
  const int64_t h = ph - g.top;
  const int64_t w = pw - g.left;
  if (h < 0 || h >= g.height || w < 0 || w >= g.width) return -1;
  return ((n * g.height + h) * g.width + w) * g.channels + c;
}

// For element i of the (unpadded) input: its index in the padded tensor, so
// cropping copies padded[CropSourceIndex(i)] into element i.
PSTRAIN_HOST_DEVICE inline int64_t CropSourceIndex(int64_t i,
                                                   const PadGeometry& g) {
  const int64_t c = i % g.channels;
  int64_t rest = i / g.channels;
  const int64_t w = rest % g.width;
  rest /= g.width;
  const int64_t h = rest % g.height;
  const int64_t n = rest / g.height;
  return ((n * g.padded_height + h + g.top) * g.padded_width + w + g.left) *
             g.channels +
         c;
}

// Transposing a row-major [rows, cols] matrix into [cols, rows]: the source
// index of output element o. An HWIO kernel [kh, kw, in, out] is the matrix
// [kh * kw * in, out]; its transpose [out, kh * kw * in] is cuDNN's NHWC
// filter layout KRSC [out, kh, kw, in], and back.
PSTRAIN_HOST_DEVICE inline int64_t TransposeSourceIndex(int64_t o, int64_t rows,
                                                        int64_t cols) {
  const int64_t r = o % rows;
  const int64_t c = o / rows;
  return r * cols + c;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_KERNEL_MATH_H_
