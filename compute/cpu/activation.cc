#include "compute/cpu/activation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluScale = 1.0507009873554805f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Keras's ReLU(max_value, negative_slope, threshold) and its derivative.
float KerasRelu(const ActivationParams& p, float x) {
  if (x <= p.threshold) return p.negative_slope * (x - p.threshold);
  return p.max_value > 0 ? std::min(x, p.max_value) : x;
}
float KerasReluGrad(const ActivationParams& p, float x) {
  if (x <= p.threshold) return p.negative_slope;
  return p.max_value > 0 && x >= p.max_value ? 0.0f : 1.0f;
}

float Forward1(Activation a, const ActivationParams& p, float x) {
  switch (a) {
    case Activation::kKerasRelu:
      return KerasRelu(p, x);
    case Activation::kGelu:
      return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
    case Activation::kGeluTanh:
      return 0.5f * x *
             (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
    case Activation::kSigmoid:
      return Sigmoid(x);
    case Activation::kHardSigmoid:
      return std::clamp(p.alpha * x + 0.5f, 0.0f, 1.0f);
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kSilu:
      return x * Sigmoid(x);
    case Activation::kElu:
      return x > 0 ? x : p.alpha * std::expm1(x);
    case Activation::kSelu:
      return kSeluScale * (x > 0 ? x : kSeluAlpha * std::expm1(x));
    case Activation::kSoftplus:
      return std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)));
    default:
      return x;  // Not elementwise; Create refuses the rest.
  }
}

// f'(x), given x and y = f(x).
float Grad1(Activation a, const ActivationParams& p, float x, float y) {
  switch (a) {
    case Activation::kKerasRelu:
      return KerasReluGrad(p, x);
    case Activation::kGelu: {
      const float pdf = 0.3989422804014327f * std::exp(-0.5f * x * x);
      return 0.5f * (1.0f + std::erf(x * 0.7071067811865476f)) + x * pdf;
    }
    case Activation::kGeluTanh: {
      const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
      const float t = std::tanh(inner);
      return 0.5f * (1.0f + t) +
             0.5f * x * (1.0f - t * t) * kSqrt2OverPi *
                 (1.0f + 3.0f * kGeluCubic * x * x);
    }
    case Activation::kSigmoid:
      return y * (1.0f - y);
    case Activation::kHardSigmoid: {
      const float z = p.alpha * x + 0.5f;
      return z > 0.0f && z < 1.0f ? p.alpha : 0.0f;
    }
    case Activation::kTanh:
      return 1.0f - y * y;
    case Activation::kSilu: {
      const float s = Sigmoid(x);
      return s + x * s * (1.0f - s);
    }
    case Activation::kElu:
      return x > 0 ? 1.0f : p.alpha * std::exp(x);
    case Activation::kSelu:
      return kSeluScale * (x > 0 ? 1.0f : kSeluAlpha * std::exp(x));
    case Activation::kSoftplus:
      return Sigmoid(x);
    default:
      return 1.0f;
  }
}

bool IsAxiswise(Activation a) {
  return a == Activation::kSoftmax || a == Activation::kLogSoftmax;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ActivationOp>> ActivationOp::Create(
    const ActivationShape& shape) {
  if (shape.outer <= 0 || shape.axis <= 0 || shape.inner <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ActivationOp: shape [", shape.outer, ", ", shape.axis, ", ",
        shape.inner, "] must be positive"));
  }
  if (shape.activation == Activation::kLinear ||
      shape.activation == Activation::kRelu) {
    return absl::InvalidArgumentError(
        "ActivationOp: linear and relu need no ActivationOp");
  }
  return std::unique_ptr<ActivationOp>(new ActivationOp(shape));
}

absl::Status ActivationOp::Forward(const float* x, float* y) const {
  const Activation a = shape_.activation;
  if (!IsAxiswise(a)) {
    for (int64_t i = 0; i < n_; ++i) y[i] = Forward1(a, shape_.params, x[i]);
    return absl::OkStatus();
  }
  const int64_t len = shape_.axis;
  const int64_t inner = shape_.inner;
  for (int64_t o = 0; o < shape_.outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const float* xs = x + o * len * inner + in;
      float* ys = y + o * len * inner + in;
      float max = xs[0];
      for (int64_t k = 1; k < len; ++k) max = std::max(max, xs[k * inner]);
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) sum += std::exp(xs[k * inner] - max);
      if (a == Activation::kSoftmax) {
        const float scale = static_cast<float>(1.0 / sum);
        for (int64_t k = 0; k < len; ++k) {
          ys[k * inner] = std::exp(xs[k * inner] - max) * scale;
        }
      } else {
        const float log_sum = static_cast<float>(std::log(sum)) + max;
        for (int64_t k = 0; k < len; ++k) ys[k * inner] = xs[k * inner] - log_sum;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ActivationOp::Backward(const float* x, const float* y,
                                    const float* dy, float* dx) const {
  const Activation a = shape_.activation;
  if (!IsAxiswise(a)) {
    for (int64_t i = 0; i < n_; ++i) {
      dx[i] = dy[i] * Grad1(a, shape_.params, x[i], y[i]);
    }
    return absl::OkStatus();
  }
  const int64_t len = shape_.axis;
  const int64_t inner = shape_.inner;
  for (int64_t o = 0; o < shape_.outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * len * inner + in;
      double dot = 0;  // softmax: sum(dy * y); log_softmax: sum(dy).
      for (int64_t k = 0; k < len; ++k) {
        const int64_t i = base + k * inner;
        dot += a == Activation::kSoftmax ? dy[i] * y[i] : dy[i];
      }
      const float d = static_cast<float>(dot);
      for (int64_t k = 0; k < len; ++k) {
        const int64_t i = base + k * inner;
        dx[i] = a == Activation::kSoftmax ? y[i] * (dy[i] - d)
                                          : dy[i] - std::exp(y[i]) * d;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
