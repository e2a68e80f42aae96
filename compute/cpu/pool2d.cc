#include "compute/cpu/pool2d.h"

#include <algorithm>

#include "compute/cpu/dnnl_util.h"
#include "compute/cpu/pool_windows.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Tag = dnnl::memory::format_tag;

}  // namespace

absl::StatusOr<std::unique_ptr<AvgPool2DOp>> AvgPool2DOp::Create(
    const Pool2DShape& shape, Engine* engine) {
  absl::StatusOr<PoolWindows> windows = CheckPool2D("AvgPool2D", shape);
  if (!windows.ok()) return windows.status();
  std::unique_ptr<AvgPool2DOp> op(
      new AvgPool2DOp(shape, engine, windows->height, windows->width));
  const absl::Status status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status AvgPool2DOp::Init() {
  return Guard("AvgPool2D: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const Pool2DShape& s = shape_;
    memory::desc x_md =
        F32Desc({s.batch, s.channels, s.height, s.width}, Tag::nhwc);
    memory::desc y_md =
        F32Desc({s.batch, s.channels, out_h_.output, out_w_.output}, Tag::nhwc);
    memory::dims strides = {s.stride_h, s.stride_w};
    memory::dims kernel = {s.pool_h, s.pool_w};
    memory::dims pad_l = {out_h_.pad_before, out_w_.pad_before};
    memory::dims pad_r = {out_h_.pad_after, out_w_.pad_after};
    dnnl::primitive_attr attr = UserScratchpadAttr();
    // Divides by the in-bounds count; with "valid" there is no padding, so
    // that is the whole window.
    const algorithm avg = algorithm::pooling_avg_exclude_padding;

    x_mem_ = UserMemory(x_md, e);
    y_mem_ = UserMemory(y_md, e);
    dy_mem_ = UserMemory(y_md, e);
    dx_mem_ = UserMemory(x_md, e);

    dnnl::pooling_forward::primitive_desc fwd_pd(
        dnnl::pooling_forward::desc(prop_kind::forward_training, avg, x_md,
                                    y_md, strides, kernel, pad_l, pad_r),
        attr, e);
    fwd_ = dnnl::pooling_forward(fwd_pd);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_}, {DNNL_ARG_DST, y_mem_}};
    AddScratchpad(fwd_pd, e, &fwd_args_);

    dnnl::pooling_backward::primitive_desc bwd_pd(
        dnnl::pooling_backward::desc(avg, x_md, y_md, strides, kernel, pad_l,
                                     pad_r),
        attr, e, fwd_pd);
    bwd_ = dnnl::pooling_backward(bwd_pd);
    bwd_args_ = {{DNNL_ARG_DIFF_DST, dy_mem_}, {DNNL_ARG_DIFF_SRC, dx_mem_}};
    AddScratchpad(bwd_pd, e, &bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status AvgPool2DOp::Forward(const float* x, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "AvgPool2D forward: x and y are required");
  }
  return Guard("AvgPool2D forward", [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(y_mem_, y);
    return engine_->Execute("AvgPool2D forward", fwd_, fwd_args_);
  });
}

absl::Status AvgPool2DOp::Backward(const float* dy, float* dx) {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        "AvgPool2D backward: dy and dx are required");
  }
  return Guard("AvgPool2D backward", [&]() -> absl::Status {
    SetHandle(dy_mem_, dy);
    SetHandle(dx_mem_, dx);
    return engine_->Execute("AvgPool2D backward", bwd_, bwd_args_);
  });
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
