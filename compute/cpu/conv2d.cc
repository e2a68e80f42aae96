#include "compute/cpu/conv2d.h"

#include "absl/strings/str_cat.h"
#include "compute/conv2d_geometry.h"
#include "compute/cpu/dnnl_util.h"
#include "compute/weighted_op_checks.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Tag = dnnl::memory::format_tag;

constexpr char kOp[] = "Conv2D";

}  // namespace

absl::StatusOr<std::unique_ptr<Conv2DOp>> Conv2DOp::Create(
    const Conv2DShape& shape, Engine* engine) {
  absl::Status status = CheckPositive(kOp, PositiveSizes(shape));
  if (status.ok()) status = CheckConv2DGroups(shape);
  if (!status.ok()) return status;
  const absl::StatusOr<Conv2DWindows> out = Conv2DOutputWindows(shape);
  if (!out.ok()) return out.status();
  std::unique_ptr<Conv2DOp> op(new Conv2DOp(shape, engine, *out));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status Conv2DOp::Init() {
  return Guard("Conv2D: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const Conv2DShape& s = shape_;
    memory::desc x_md =
        F32Desc({s.batch, s.in_channels, s.height, s.width}, Tag::nhwc);
    memory::desc y_md = F32Desc(
        {s.batch, s.out_channels, out_h_.output, out_w_.output}, Tag::nhwc);
    // Keras's kernel [kh, kw, in / groups, out] as oneDNN's OIHW dims, or
    // with groups its GOIHW dims over the same memory (out = g * out/g + o).
    const int64_t in_g = s.in_channels / s.groups;
    const int64_t out_g = s.out_channels / s.groups;
    memory::dims w_dims;
    memory::desc w_md;
    if (s.groups == 1) {
      w_dims = {s.out_channels, s.in_channels, s.kernel_h, s.kernel_w};
      w_md = F32Desc(w_dims, Tag::hwio);
    } else {
      w_dims = {s.groups, out_g, in_g, s.kernel_h, s.kernel_w};
      w_md = memory::desc(w_dims, memory::data_type::f32,
                          memory::dims{out_g, 1, s.out_channels,
                                       s.kernel_w * in_g * s.out_channels,
                                       in_g * s.out_channels});
    }
    // What the convolutions read: float32, or with bf16 bf16 copies of x,
    // w and dy (they write float32 y, dx, dw and db either way).
    const memory::data_type in_type =
        s.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    memory::desc w_any(w_dims, in_type, Tag::any);
    memory::desc dw_any(w_dims, memory::data_type::f32, Tag::any);
    memory::desc x_in = x_md, dy_in = y_md;
    if (s.bf16) {
      x_in = memory::desc(x_md.dims(), in_type, Tag::nhwc);
      dy_in = memory::desc(y_md.dims(), in_type, Tag::nhwc);
    }
    memory::desc b_md = F32Desc({s.out_channels}, Tag::a);
    memory::dims strides = {s.stride_h, s.stride_w};
    // oneDNN counts the inputs skipped between taps: rate - 1.
    memory::dims dilates = {s.dilation_h - 1, s.dilation_w - 1};
    memory::dims pad_l = {out_h_.pad_before, out_w_.pad_before};
    memory::dims pad_r = {out_h_.pad_after, out_w_.pad_after};
    dnnl::primitive_attr attr = UserScratchpadAttr();
    dnnl::primitive_attr fwd_attr = UserScratchpadAttr();
    if (s.fuse_relu) {
      dnnl::post_ops post_ops;
      post_ops.append_eltwise(/*scale=*/1.0f, algorithm::eltwise_relu,
                              /*alpha=*/0.0f, /*beta=*/0.0f);
      fwd_attr.set_post_ops(post_ops);
    }

    if (s.bf16) {
      x_bf16_.Init(x_md, x_in, engine_);
      dy_bf16_.Init(y_md, dy_in, engine_);
      x_mem_ = x_bf16_.memory();
      dy_mem_ = dy_bf16_.memory();
    } else {
      x_mem_ = UserMemory(x_md, e);
      dy_mem_ = UserMemory(y_md, e);
    }
    y_mem_ = UserMemory(y_md, e);
    b_mem_ = UserMemory(b_md, e);
    db_mem_ = UserMemory(b_md, e);
    dw_mem_ = UserMemory(w_md, e);

    // Forward.
    dnnl::convolution_forward::desc fwd_desc =
        s.use_bias
            ? dnnl::convolution_forward::desc(
                  prop_kind::forward_training, algorithm::convolution_direct,
                  x_in, w_any, b_md, y_md, strides, dilates, pad_l, pad_r)
            : dnnl::convolution_forward::desc(
                  prop_kind::forward_training, algorithm::convolution_direct,
                  x_in, w_any, y_md, strides, dilates, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, fwd_attr, e);
    fwd_ = dnnl::convolution_forward(fwd_pd);
    fwd_weights_.Init(w_md, fwd_pd.weights_desc(), engine_);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_},
                 {DNNL_ARG_WEIGHTS, fwd_weights_.memory()},
                 {DNNL_ARG_DST, y_mem_}};
    if (s.use_bias) fwd_args_[DNNL_ARG_BIAS] = b_mem_;
    AddScratchpad(fwd_pd, e, &fwd_args_);

    // Backward data: dx = conv_transpose(dy, w).
    if (s.compute_dx) {
      dx_mem_ = UserMemory(x_md, e);
      dnnl::convolution_backward_data::desc desc(algorithm::convolution_direct,
                                                 x_md, w_any, dy_in, strides,
                                                 dilates, pad_l, pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, attr, e, fwd_pd);
      bwd_data_ = dnnl::convolution_backward_data(pd);
      // When backward data wants the forward's layout, one cached copy
      // serves both.
      bwd_data_shares_weights_ = pd.weights_desc() == fwd_pd.weights_desc();
      if (!bwd_data_shares_weights_) {
        bwd_data_weights_.Init(w_md, pd.weights_desc(), engine_);
      }
      bwd_data_args_ = {{DNNL_ARG_DIFF_DST, dy_mem_},
                        {DNNL_ARG_WEIGHTS, bwd_data_cache().memory()},
                        {DNNL_ARG_DIFF_SRC, dx_mem_}};
      AddScratchpad(pd, e, &bwd_data_args_);
    }

    // Backward weights: dw and db.
    dnnl::convolution_backward_weights::desc bw_desc =
        s.use_bias ? dnnl::convolution_backward_weights::desc(
                         algorithm::convolution_direct, x_in, dw_any, b_md,
                         dy_in, strides, dilates, pad_l, pad_r)
                   : dnnl::convolution_backward_weights::desc(
                         algorithm::convolution_direct, x_in, dw_any, dy_in,
                         strides, dilates, pad_l, pad_r);
    dnnl::convolution_backward_weights::primitive_desc bw_pd(bw_desc, attr, e,
                                                             fwd_pd);
    bwd_weights_ = dnnl::convolution_backward_weights(bw_pd);
    dw_reorder_needed_ = bw_pd.diff_weights_desc() != w_md;
    dnnl::memory dw_out = dw_mem_;
    if (dw_reorder_needed_) {
      dw_out = dnnl::memory(bw_pd.diff_weights_desc(), e);
      dnnl::reorder::primitive_desc pd(e, bw_pd.diff_weights_desc(), e, w_md,
                                       attr);
      dw_reorder_ = dnnl::reorder(pd);
      dw_reorder_args_ = {{DNNL_ARG_FROM, dw_out}, {DNNL_ARG_TO, dw_mem_}};
      AddScratchpad(pd, e, &dw_reorder_args_);
    }
    bwd_weights_args_ = {{DNNL_ARG_SRC, x_mem_},
                         {DNNL_ARG_DIFF_DST, dy_mem_},
                         {DNNL_ARG_DIFF_WEIGHTS, dw_out}};
    if (s.use_bias) bwd_weights_args_[DNNL_ARG_DIFF_BIAS] = db_mem_;
    AddScratchpad(bw_pd, e, &bwd_weights_args_);
    return absl::OkStatus();
  });
}

absl::Status Conv2DOp::Forward(const float* x, const float* w,
                               uint64_t weights_step, const float* b,
                               float* y) {
  const absl::Status checked =
      CheckWeightedForward("Conv2D", x, w, b, y, shape_.use_bias);
  if (!checked.ok()) return checked;
  return Guard("Conv2D forward", [&]() -> absl::Status {
    absl::Status status = fwd_weights_.Prepare("Conv2D forward: reorder w",
                                               engine_, w, weights_step);
    if (!status.ok()) return status;
    if (shape_.bf16) {
      status = x_bf16_.Convert("Conv2D forward: x to bf16", engine_, x);
      if (!status.ok()) return status;
    } else {
      SetHandle(x_mem_, x);
    }
    SetHandle(y_mem_, y);
    if (shape_.use_bias) SetHandle(b_mem_, b);
    return engine_->Execute("Conv2D forward", fwd_, fwd_args_);
  });
}

absl::Status Conv2DOp::Backward(const float* x, const float* w,
                                uint64_t weights_step, const float* dy,
                                float* dx, float* dw, float* db) {
  const absl::Status checked = CheckWeightedBackward(
      "Conv2D", x, w, dy, dx, dw, db, shape_.compute_dx, shape_.use_bias);
  if (!checked.ok()) return checked;
  return Guard("Conv2D backward", [&]() -> absl::Status {
    if (shape_.bf16) {
      // One conversion of dy for both primitives; x's from the Forward when
      // it was of the same buffer.
      absl::Status status =
          dy_bf16_.Convert("Conv2D backward: dy to bf16", engine_, dy);
      if (status.ok() && !x_bf16_.Holds(x)) {
        status = x_bf16_.Convert("Conv2D backward: x to bf16", engine_, x);
      }
      x_bf16_.Invalidate();
      if (!status.ok()) return status;
    } else {
      SetHandle(dy_mem_, dy);
    }
    if (shape_.compute_dx) {
      absl::Status status = bwd_data_cache().Prepare(
          "Conv2D backward: reorder w", engine_, w, weights_step);
      if (!status.ok()) return status;
      SetHandle(dx_mem_, dx);
      status =
          engine_->Execute("Conv2D backward data", bwd_data_, bwd_data_args_);
      if (!status.ok()) return status;
    }
    if (!shape_.bf16) SetHandle(x_mem_, x);
    SetHandle(dw_mem_, dw);
    if (shape_.use_bias) SetHandle(db_mem_, db);
    absl::Status status = engine_->Execute("Conv2D backward weights",
                                           bwd_weights_, bwd_weights_args_);
    if (!status.ok() || !dw_reorder_needed_) return status;
    return engine_->Execute("Conv2D backward: reorder dw", dw_reorder_,
                            dw_reorder_args_);
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
