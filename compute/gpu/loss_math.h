// The arithmetic of the GPU loss kernels that kernel_math.h does not have
// (categorical cross-entropy on target rows, binary cross-entropy, mean
// absolute error, Huber, binary accuracy), one example (row) at a time, in
// double like compute/cpu/losses.cc, written once for both compilers: nvcc
// compiles it into loss_kernels.cu (one thread per row), the host compiler
// into loss_math_test, which checks it against compute/cpu/losses.h on a
// machine without a GPU.
//
// Plain C++ with <math.h> and <stdint.h> only (nvcc includes it).
//
//   double loss = SigmoidCrossEntropyRow(logit, label, &dlogit);
#ifndef PSTRAIN_COMPUTE_GPU_LOSS_MATH_H_
#define PSTRAIN_COMPUTE_GPU_LOSS_MATH_H_

#include <math.h>
#include <stdint.h>

#include "compute/gpu/kernel_math.h"

namespace pstrain {
namespace worker {
namespace gpu {

PSTRAIN_HOST_DEVICE inline double ClampDouble(double v, double low,
                                              double high) {
  return v < low ? low : (high < v ? high : v);
}

// Whether tf.clip_by_value(v, low, high) passes v's gradient.
PSTRAIN_HOST_DEVICE inline bool InClipRange(double v, double low, double high) {
  return v >= low && v <= high;
}

// Keras CategoricalCrossentropy(from_logits=True) for one row:
// -sum_j t[j] log softmax(row)[j] by log-sum-exp; when grad is not null,
// grad[j] = softmax(row)[j] * sum_k t[k] - t[j].
PSTRAIN_HOST_DEVICE inline double CategoricalCrossEntropyFromLogitsRow(
    const float* row, const float* target, int64_t classes, float* grad) {
  float max_value = row[0];
  for (int64_t j = 1; j < classes; ++j) {
    if (max_value < row[j]) max_value = row[j];
  }
  const double max = max_value;
  double sum_exp = 0, target_sum = 0;
  for (int64_t j = 0; j < classes; ++j) {
    sum_exp += exp(row[j] - max);
    target_sum += target[j];
  }
  const double log_sum_exp = max + log(sum_exp);
  double loss = 0;
  for (int64_t j = 0; j < classes; ++j) {
    if (target[j] != 0) loss += target[j] * (log_sum_exp - row[j]);
  }
  if (grad != nullptr) {
    for (int64_t j = 0; j < classes; ++j) {
      grad[j] = static_cast<float>(exp(row[j] - log_sum_exp) * target_sum -
                                   target[j]);
    }
  }
  return loss;
}

// Keras CategoricalCrossentropy(from_logits=False) for one row: q = p / sum
// p, loss -sum_j t[j] log(clip(q[j], low, high)); grad[k] = sum over the
// unclipped j of t[j] (1 / sum - [j == k] / p[j]).
PSTRAIN_HOST_DEVICE inline double CategoricalCrossEntropyFromProbabilitiesRow(
    const float* row, const float* target, int64_t classes, float low,
    float high, float* grad) {
  double sum = 0;
  for (int64_t j = 0; j < classes; ++j) sum += row[j];
  double loss = 0, passed_targets = 0;
  for (int64_t j = 0; j < classes; ++j) {
    if (target[j] == 0) continue;
    const double q = row[j] / sum;
    loss -= target[j] * log(ClampDouble(q, low, high));
    if (InClipRange(q, low, high)) passed_targets += target[j];
  }
  if (grad != nullptr) {
    for (int64_t j = 0; j < classes; ++j) {
      double g = passed_targets / sum;
      if (target[j] != 0 && InClipRange(row[j] / sum, low, high)) {
        g -= target[j] / row[j];
      }
      grad[j] = static_cast<float>(g);
    }
  }
  return loss;
}

// Keras BinaryCrossentropy(from_logits=True) for one logit z and label y
// (0 or 1): max(z, 0) - z y + log(1 + exp(-|z|)); grad = sigmoid(z) - y.
PSTRAIN_HOST_DEVICE inline double SigmoidCrossEntropyRow(float logit,
                                                         int32_t label,
                                                         float* grad) {
  const double z = logit;
  const double y = label;
  if (grad != nullptr) {
    double sigmoid;
    if (z >= 0) {
      sigmoid = 1.0 / (1.0 + exp(-z));
    } else {
      const double e = exp(z);
      sigmoid = e / (1.0 + e);
    }
    *grad = static_cast<float>(sigmoid - y);
  }
  return (z > 0 ? z : 0.0) - z * y + log1p(exp(-fabs(z)));
}

// Keras BinaryCrossentropy(from_logits=False) for one probability p and
// label (0 or 1): with c = clip(p, low, high), -log(c) or -log(1 - c); grad
// -1 / c or 1 / (1 - c) where p is within the clip range, else 0.
PSTRAIN_HOST_DEVICE inline double BinaryCrossEntropyFromProbabilityRow(
    float probability, int32_t label, float low, float high, float* grad) {
  const double c = ClampFloat(probability, low, high);
  const bool positive = label == 1;
  if (grad != nullptr) {
    *grad = !InClipRange(probability, low, high)
                ? 0.0f
                : (positive ? static_cast<float>(-1.0 / c)
                            : static_cast<float>(1.0 / (1.0 - c)));
  }
  return positive ? -log(c) : -log(1.0 - c);
}

// sum_j |p[j] - t[j]| for one row (not yet divided by `outputs`); grad[j] =
// sign(p[j] - t[j]) / outputs (0 where equal).
struct AbsoluteError {
  PSTRAIN_HOST_DEVICE double Value(double e) const { return fabs(e); }
  PSTRAIN_HOST_DEVICE double Derivative(double e) const {
    return e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0);
  }
};

PSTRAIN_HOST_DEVICE inline double AbsoluteErrorRow(const float* predictions,
                                                   const float* targets,
                                                   int64_t outputs,
                                                   float* grad) {
  return ErrorRow(predictions, targets, outputs, AbsoluteError(), grad);
}

// sum_j h(p[j] - t[j]) for one row (not yet divided by `outputs`), h the
// Huber function of `delta`; grad[j] = h'(e) / outputs.
struct HuberError {
  float delta;
  PSTRAIN_HOST_DEVICE double Value(double e) const {
    const double abs_e = fabs(e);
    return abs_e <= delta ? 0.5 * e * e : delta * abs_e - 0.5 * delta * delta;
  }
  PSTRAIN_HOST_DEVICE double Derivative(double e) const {
    return fabs(e) <= delta ? e : (e > 0 ? delta : -delta);
  }
};

PSTRAIN_HOST_DEVICE inline double HuberRow(const float* predictions,
                                           const float* targets,
                                           int64_t outputs, float delta,
                                           float* grad) {
  return ErrorRow(predictions, targets, outputs, HuberError{delta}, grad);
}

// 1 if the predicted class (score above `threshold`: 0 for a logit, 0.5 for
// a probability) equals the label (0 or 1), else 0.
PSTRAIN_HOST_DEVICE inline double BinaryCorrectRow(float score, float threshold,
                                                   int32_t label) {
  return (score > threshold ? 1 : 0) == label ? 1.0 : 0.0;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_LOSS_MATH_H_
