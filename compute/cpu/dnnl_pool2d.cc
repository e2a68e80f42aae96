#include "compute/cpu/dnnl_pool2d.h"

#include "absl/strings/str_cat.h"
#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::Status DnnlPool2DOp::Init() {
  forward_name_ = absl::StrCat(op_, " forward");
  backward_name_ = absl::StrCat(op_, " backward");
  return Guard(absl::StrCat(op_, ": create"), [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const Pool2DShape& s = shape_;
    const dnnl::memory::format_tag nhwc = dnnl::memory::format_tag::nhwc;
    const dnnl::memory::desc x_md =
        F32Desc({s.batch, s.channels, s.height, s.width}, nhwc);
    const dnnl::memory::desc y_md =
        F32Desc({s.batch, s.channels, out_h_.output, out_w_.output}, nhwc);
    const dnnl::memory::dims strides = {s.stride_h, s.stride_w};
    const dnnl::memory::dims kernel = {s.pool_h, s.pool_w};
    const dnnl::memory::dims pad_l = {out_h_.pad_before, out_w_.pad_before};
    const dnnl::memory::dims pad_r = {out_h_.pad_after, out_w_.pad_after};
    const dnnl::primitive_attr attr = UserScratchpadAttr();

    x_mem_ = UserMemory(x_md, e);
    y_mem_ = UserMemory(y_md, e);
    dy_mem_ = UserMemory(y_md, e);
    dx_mem_ = UserMemory(x_md, e);

    dnnl::pooling_forward::primitive_desc fwd_pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training,
                                    algorithm_, x_md, y_md, strides, kernel,
                                    pad_l, pad_r),
        attr, e);
    fwd_ = dnnl::pooling_forward(fwd_pd);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_}, {DNNL_ARG_DST, y_mem_}};
    bwd_args_ = {{DNNL_ARG_DIFF_DST, dy_mem_}, {DNNL_ARG_DIFF_SRC, dx_mem_}};
    // pooling_max records where each maximum came from, for backward.
    if (fwd_pd.workspace_desc().get_size() > 0) {
      workspace_ = dnnl::memory(fwd_pd.workspace_desc(), e);
      fwd_args_[DNNL_ARG_WORKSPACE] = workspace_;
      bwd_args_[DNNL_ARG_WORKSPACE] = workspace_;
    }
    AddScratchpad(fwd_pd, e, &fwd_args_);

    dnnl::pooling_backward::primitive_desc bwd_pd(
        dnnl::pooling_backward::desc(algorithm_, x_md, y_md, strides, kernel,
                                     pad_l, pad_r),
        attr, e, fwd_pd);
    bwd_ = dnnl::pooling_backward(bwd_pd);
    AddScratchpad(bwd_pd, e, &bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status DnnlPool2DOp::RunForward(const float* x, float* y) {
  return Guard(forward_name_, [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(y_mem_, y);
    return engine_->Execute(forward_name_, fwd_, fwd_args_);
  });
}

absl::Status DnnlPool2DOp::RunBackward(const float* dy, float* dx) {
  return Guard(backward_name_, [&]() -> absl::Status {
    SetHandle(dy_mem_, dy);
    SetHandle(dx_mem_, dx);
    return engine_->Execute(backward_name_, bwd_, bwd_args_);
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
