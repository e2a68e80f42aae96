#include "compute/cpu/max_pool2d.h"

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

absl::StatusOr<std::unique_ptr<MaxPool2DOp>> MaxPool2DOp::Create(
    const Pool2DShape& shape, Engine* engine) {
  absl::StatusOr<PoolWindows> windows = CheckPool2D("MaxPool2D", shape);
  if (!windows.ok()) return windows.status();
  std::unique_ptr<MaxPool2DOp> op(
      new MaxPool2DOp(shape, engine, windows->height, windows->width));
  const absl::Status status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status MaxPool2DOp::Init() {
  return Guard("MaxPool2D: create", [&]() -> absl::Status {
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

    x_mem_ = UserMemory(x_md, e);
    y_mem_ = UserMemory(y_md, e);
    dy_mem_ = UserMemory(y_md, e);
    dx_mem_ = UserMemory(x_md, e);

    dnnl::pooling_forward::desc fwd_desc(prop_kind::forward_training,
                                         algorithm::pooling_max, x_md, y_md,
                                         strides, kernel, pad_l, pad_r);
    dnnl::pooling_forward::primitive_desc fwd_pd(fwd_desc, attr, e);
    fwd_ = dnnl::pooling_forward(fwd_pd);
    workspace_ = dnnl::memory(fwd_pd.workspace_desc(), e);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_},
                 {DNNL_ARG_DST, y_mem_},
                 {DNNL_ARG_WORKSPACE, workspace_}};
    AddScratchpad(fwd_pd, e, &fwd_args_);

    dnnl::pooling_backward::desc bwd_desc(algorithm::pooling_max, x_md, y_md,
                                          strides, kernel, pad_l, pad_r);
    dnnl::pooling_backward::primitive_desc bwd_pd(bwd_desc, attr, e, fwd_pd);
    bwd_ = dnnl::pooling_backward(bwd_pd);
    bwd_args_ = {{DNNL_ARG_DIFF_DST, dy_mem_},
                 {DNNL_ARG_DIFF_SRC, dx_mem_},
                 {DNNL_ARG_WORKSPACE, workspace_}};
    AddScratchpad(bwd_pd, e, &bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status MaxPool2DOp::Forward(const float* x, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "MaxPool2D forward: x and y are required");
  }
  return Guard("MaxPool2D forward", [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(y_mem_, y);
    absl::Status status =
        engine_->Execute("MaxPool2D forward", fwd_, fwd_args_);
    has_forward_ = status.ok();
    return status;
  });
}

absl::Status MaxPool2DOp::Backward(const float* dy, float* dx) {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        "MaxPool2D backward: dy and dx are required");
  }
  if (!has_forward_) {
    return absl::FailedPreconditionError(
        "MaxPool2D backward: no Forward has run");
  }
  return Guard("MaxPool2D backward", [&]() -> absl::Status {
    SetHandle(dy_mem_, dy);
    SetHandle(dx_mem_, dx);
    return engine_->Execute("MaxPool2D backward", bwd_, bwd_args_);
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
