#include "compute/cpu/softmax.h"

#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<std::unique_ptr<SoftmaxOp>> SoftmaxOp::Create(
    const SoftmaxShape& shape, Engine* engine) {
  absl::Status status = CheckPositive(
      "Softmax", {{"batch", shape.batch}, {"classes", shape.classes}});
  if (!status.ok()) return status;
  std::unique_ptr<SoftmaxOp> op(new SoftmaxOp(shape, engine));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status SoftmaxOp::Init() {
  return Guard("Softmax: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    dnnl::memory::desc md =
        F32Desc({shape_.batch, shape_.classes}, dnnl::memory::format_tag::ab);
    dnnl::primitive_attr attr = UserScratchpadAttr();
    x_mem_ = UserMemory(md, e);
    y_mem_ = UserMemory(md, e);
    dy_mem_ = UserMemory(md, e);
    dx_mem_ = UserMemory(md, e);
    constexpr int kAxis = 1;
    dnnl::softmax_forward::primitive_desc fwd_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md,
                                    kAxis),
        attr, e);
    fwd_ = dnnl::softmax_forward(fwd_pd);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_}, {DNNL_ARG_DST, y_mem_}};
    AddScratchpad(fwd_pd, e, &fwd_args_);
    dnnl::softmax_backward::primitive_desc bwd_pd(
        dnnl::softmax_backward::desc(md, md, kAxis), attr, e, fwd_pd);
    bwd_ = dnnl::softmax_backward(bwd_pd);
    bwd_args_ = {{DNNL_ARG_DST, y_mem_},
                 {DNNL_ARG_DIFF_DST, dy_mem_},
                 {DNNL_ARG_DIFF_SRC, dx_mem_}};
    AddScratchpad(bwd_pd, e, &bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status SoftmaxOp::RunForward(const float* x, float* y) {
  return Guard("Softmax forward", [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(y_mem_, y);
    return engine_->Execute("Softmax forward", fwd_, fwd_args_);
  });
}

absl::Status SoftmaxOp::RunBackward(const float* y, const float* dy,
                                    float* dx) {
  return Guard("Softmax backward", [&]() -> absl::Status {
    SetHandle(y_mem_, y);
    SetHandle(dy_mem_, dy);
    SetHandle(dx_mem_, dx);
    return engine_->Execute("Softmax backward", bwd_, bwd_args_);
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
