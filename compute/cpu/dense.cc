#include "compute/cpu/dense.h"

#include <algorithm>

#include "compute/cpu/dnnl_util.h"
#include "compute/weighted_op_checks.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<std::unique_ptr<DenseOp>> DenseOp::Create(
    const DenseShape& shape, Engine* engine) {
  absl::Status status = CheckPositive(
      "Dense", {{"batch", shape.batch}, {"in", shape.in}, {"out", shape.out}});
  if (!status.ok()) return status;
  std::unique_ptr<DenseOp> op(new DenseOp(shape, engine));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status DenseOp::Init() {
  return Guard("Dense: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const int64_t n = shape_.batch, in = shape_.in, out = shape_.out;
    memory::desc x_md = F32Desc({n, in}, Tag::ab);
    memory::desc xt_md = F32Desc({in, n}, Tag::ba);
    memory::desc w_md = F32Desc({in, out}, Tag::ab);
    memory::desc wt_md = F32Desc({out, in}, Tag::ba);
    memory::desc b_md = F32Desc({1, out}, Tag::ab);
    memory::desc y_md = F32Desc({n, out}, Tag::ab);
    dnnl::primitive_attr attr = UserScratchpadAttr();

    b_mem_ = UserMemory(b_md, e);
    y_mem_ = UserMemory(y_md, e);
    dx_mem_ = UserMemory(x_md, e);
    dw_mem_ = UserMemory(w_md, e);
    // The matmuls' inputs: the caller's float32 buffers, or bf16 copies.
    memory::desc x_in = x_md, xt_in = xt_md, w_in = w_md, wt_in = wt_md,
                 dy_in = y_md;
    if (shape_.bf16) {
      x_in = Bf16Desc({n, in}, Tag::ab);
      xt_in = Bf16Desc({in, n}, Tag::ba);
      w_in = Bf16Desc({in, out}, Tag::ab);
      wt_in = Bf16Desc({out, in}, Tag::ba);
      dy_in = Bf16Desc({n, out}, Tag::ab);
      x_bf16_.Init(x_md, x_in, engine_);
      w_bf16_.Init(w_md, w_in, engine_);
      dy_bf16_.Init(y_md, dy_in, engine_);
      x_mem_ = x_bf16_.memory();
      xt_mem_ = x_bf16_.View(xt_in, e);
      w_mem_ = w_bf16_.memory();
      wt_mem_ = w_bf16_.View(wt_in, e);
      dy_mem_ = dy_bf16_.memory();
    } else {
      x_mem_ = UserMemory(x_md, e);
      xt_mem_ = UserMemory(xt_md, e);
      w_mem_ = UserMemory(w_md, e);
      wt_mem_ = UserMemory(wt_md, e);
      dy_mem_ = UserMemory(y_md, e);
    }

    dnnl::matmul::primitive_desc fwd_pd(
        shape_.use_bias ? dnnl::matmul::desc(x_in, w_in, b_md, y_md)
                        : dnnl::matmul::desc(x_in, w_in, y_md),
        attr, e);
    fwd_ = dnnl::matmul(fwd_pd);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_},
                 {DNNL_ARG_WEIGHTS, w_mem_},
                 {DNNL_ARG_DST, y_mem_}};
    if (shape_.use_bias) fwd_args_[DNNL_ARG_BIAS] = b_mem_;
    AddScratchpad(fwd_pd, e, &fwd_args_);

    if (shape_.compute_dx) {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(dy_in, wt_in, x_md),
                                      attr, e);
      bwd_data_ = dnnl::matmul(pd);
      bwd_data_args_ = {{DNNL_ARG_SRC, dy_mem_},
                        {DNNL_ARG_WEIGHTS, wt_mem_},
                        {DNNL_ARG_DST, dx_mem_}};
      AddScratchpad(pd, e, &bwd_data_args_);
    }

    dnnl::matmul::primitive_desc bw_pd(dnnl::matmul::desc(xt_in, dy_in, w_md),
                                       attr, e);
    bwd_weights_ = dnnl::matmul(bw_pd);
    bwd_weights_args_ = {{DNNL_ARG_SRC, xt_mem_},
                         {DNNL_ARG_WEIGHTS, dy_mem_},
                         {DNNL_ARG_DST, dw_mem_}};
    AddScratchpad(bw_pd, e, &bwd_weights_args_);

    return absl::OkStatus();
  });
}

absl::Status DenseOp::Forward(const float* x, const float* w, const float* b,
                              float* y) {
  const absl::Status checked =
      CheckWeightedForward("Dense", x, w, b, y, shape_.use_bias);
  if (!checked.ok()) return checked;
  return Guard("Dense forward", [&]() -> absl::Status {
    if (shape_.bf16) {
      absl::Status status =
          x_bf16_.Convert("Dense forward: x to bf16", engine_, x);
      if (status.ok()) {
        status = w_bf16_.Convert("Dense forward: w to bf16", engine_, w);
      }
      if (!status.ok()) return status;
    } else {
      SetHandle(x_mem_, x);
      SetHandle(w_mem_, w);
    }
    SetHandle(y_mem_, y);
    if (shape_.use_bias) SetHandle(b_mem_, b);
    return engine_->Execute("Dense forward", fwd_, fwd_args_);
  });
}

absl::Status DenseOp::Backward(const float* x, const float* w, const float* dy,
                               float* dx, float* dw, float* db) {
  const absl::Status checked = CheckWeightedBackward(
      "Dense", x, w, dy, dx, dw, db, shape_.compute_dx, shape_.use_bias);
  if (!checked.ok()) return checked;
  return Guard("Dense backward", [&]() -> absl::Status {
    if (shape_.bf16) {
      // The Forward's copies of x and w serve when they are of the same
      // buffers; the next Forward converts again in any case.
      absl::Status status =
          dy_bf16_.Convert("Dense backward: dy to bf16", engine_, dy);
      if (status.ok() && !x_bf16_.Holds(x)) {
        status = x_bf16_.Convert("Dense backward: x to bf16", engine_, x);
      }
      if (status.ok() && shape_.compute_dx && !w_bf16_.Holds(w)) {
        status = w_bf16_.Convert("Dense backward: w to bf16", engine_, w);
      }
      x_bf16_.Invalidate();
      w_bf16_.Invalidate();
      if (!status.ok()) return status;
    } else {
      SetHandle(dy_mem_, dy);
    }
    if (shape_.compute_dx) {
      if (!shape_.bf16) SetHandle(wt_mem_, w);
      SetHandle(dx_mem_, dx);
      absl::Status status =
          engine_->Execute("Dense backward data", bwd_data_, bwd_data_args_);
      if (!status.ok()) return status;
    }
    if (!shape_.bf16) SetHandle(xt_mem_, x);
    SetHandle(dw_mem_, dw);
    absl::Status status = engine_->Execute("Dense backward weights",
                                           bwd_weights_, bwd_weights_args_);
    if (!status.ok() || !shape_.use_bias) return status;
    // db = column sums of dy. Our own loop: oneDNN's reduction refuses a
    // batch of 1 (source and destination the same shape).
    const int64_t out = shape_.out;
    std::copy(dy, dy + out, db);
    for (int64_t n = 1; n < shape_.batch; ++n) {
      const float* row = dy + n * out;
      for (int64_t o = 0; o < out; ++o) db[o] += row[o];
    }
    return absl::OkStatus();
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
