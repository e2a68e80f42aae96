#include "compute/cpu/pool2d.h"

#include <algorithm>

#include "compute/cpu/dnnl_util.h"
#include "compute/cpu/pool_windows.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr char kAvgOp[] = "AvgPool2D";

}  // namespace

absl::StatusOr<std::unique_ptr<AvgPool2DOp>> AvgPool2DOp::Create(
    const Pool2DShape& shape, Engine* engine) {
  absl::StatusOr<PoolWindows> windows = CheckPool2D(kAvgOp, shape);
  if (!windows.ok()) return windows.status();
  // Divides by the in-bounds count; with "valid" there is no padding, so
  // that is the whole window.
  std::unique_ptr<AvgPool2DOp> op(
      new AvgPool2DOp(kAvgOp, shape, *windows, engine,
                      dnnl::algorithm::pooling_avg_exclude_padding));
  const absl::Status status = op->Init();
  if (!status.ok()) return status;
  return op;
}

GlobalPoolOp::GlobalPoolOp(const GlobalPoolShape& shape) : shape_(shape) {
  if (shape.mode == GlobalPoolMode::kAverage) {
    sums_.resize(shape.channels);
  } else {
    argmax_.resize(shape.batch * shape.channels);
  }
}

absl::StatusOr<std::unique_ptr<GlobalPoolOp>> GlobalPoolOp::Create(
    const GlobalPoolShape& shape) {
  absl::Status status =
      CheckPositive("GlobalPool", {{"batch", shape.batch},
                                   {"steps", shape.steps},
                                   {"channels", shape.channels}});
  if (!status.ok()) return status;
  return std::unique_ptr<GlobalPoolOp>(new GlobalPoolOp(shape));
}

absl::Status GlobalPoolOp::Forward(const float* x, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "GlobalPool forward: x and y are required");
  }
  const int64_t steps = shape_.steps, channels = shape_.channels;
  for (int64_t b = 0; b < shape_.batch; ++b) {
    const float* xb = x + b * steps * channels;
    float* yb = y + b * channels;
    if (shape_.mode == GlobalPoolMode::kAverage) {
      std::fill(sums_.begin(), sums_.end(), 0.0);
      for (int64_t s = 0; s < steps; ++s) {
        const float* row = xb + s * channels;
        for (int64_t c = 0; c < channels; ++c) sums_[c] += row[c];
      }
      for (int64_t c = 0; c < channels; ++c) {
        yb[c] = static_cast<float>(sums_[c] / steps);
      }
    } else {
      int64_t* argmax = argmax_.data() + b * channels;
      std::copy(xb, xb + channels, yb);
      std::fill(argmax, argmax + channels, 0);
      for (int64_t s = 1; s < steps; ++s) {
        const float* row = xb + s * channels;
        for (int64_t c = 0; c < channels; ++c) {
          if (row[c] > yb[c]) {  // Strict: ties keep the first maximum.
            yb[c] = row[c];
            argmax[c] = s;
          }
        }
      }
    }
  }
  has_forward_ = true;
  return absl::OkStatus();
}

absl::Status GlobalPoolOp::Backward(const float* dy, float* dx) {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        "GlobalPool backward: dy and dx are required");
  }
  const int64_t steps = shape_.steps, channels = shape_.channels;
  if (shape_.mode == GlobalPoolMode::kAverage) {
    const float inv_steps = static_cast<float>(1.0 / steps);
    for (int64_t b = 0; b < shape_.batch; ++b) {
      const float* dyb = dy + b * channels;
      float* dxb = dx + b * steps * channels;
      for (int64_t s = 0; s < steps; ++s) {
        for (int64_t c = 0; c < channels; ++c) {
          dxb[s * channels + c] = dyb[c] * inv_steps;
        }
      }
    }
    return absl::OkStatus();
  }
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "GlobalPool backward: no Forward has run");
  }
  std::fill(dx, dx + shape_.batch * steps * channels, 0.0f);
  for (int64_t b = 0; b < shape_.batch; ++b) {
    const int64_t* argmax = argmax_.data() + b * channels;
    for (int64_t c = 0; c < channels; ++c) {
      dx[(b * steps + argmax[c]) * channels + c] = dy[b * channels + c];
    }
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
