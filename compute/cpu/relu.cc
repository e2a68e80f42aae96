#include "compute/cpu/relu.h"

#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<std::unique_ptr<ReluOp>> ReluOp::Create(int64_t num_elements,
                                                       Engine* engine) {
  absl::Status status = CheckPositive("ReLU", {{"num_elements", num_elements}});
  if (!status.ok()) return status;
  std::unique_ptr<ReluOp> op(new ReluOp(num_elements, engine));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status ReluOp::Init() {
  return Guard("ReLU: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    dnnl::memory::desc md =
        F32Desc({num_elements_}, dnnl::memory::format_tag::a);
    dnnl::primitive_attr attr = UserScratchpadAttr();
    x_mem_ = UserMemory(md, e);
    y_mem_ = UserMemory(md, e);
    dy_mem_ = UserMemory(md, e);
    dx_mem_ = UserMemory(md, e);
    // The use_dst_for_bwd variant computes the same forward and lets
    // backward read y.
    const dnnl::algorithm relu = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc fwd_pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, relu, md,
                                    /*alpha=*/0.f, /*beta=*/0.f),
        attr, e);
    fwd_ = dnnl::eltwise_forward(fwd_pd);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_}, {DNNL_ARG_DST, y_mem_}};
    AddScratchpad(fwd_pd, e, &fwd_args_);
    dnnl::eltwise_backward::primitive_desc bwd_pd(
        dnnl::eltwise_backward::desc(relu, md, md, /*alpha=*/0.f,
                                     /*beta=*/0.f),
        attr, e, fwd_pd);
    bwd_ = dnnl::eltwise_backward(bwd_pd);
    bwd_args_ = {{DNNL_ARG_DST, y_mem_},
                 {DNNL_ARG_DIFF_DST, dy_mem_},
                 {DNNL_ARG_DIFF_SRC, dx_mem_}};
    AddScratchpad(bwd_pd, e, &bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status ReluOp::RunForward(const float* x, float* y) {
  return Guard("ReLU forward", [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(y_mem_, y);
    return engine_->Execute("ReLU forward", fwd_, fwd_args_);
  });
}

absl::Status ReluOp::RunBackward(const float* y, const float* dy, float* dx) {
  return Guard("ReLU backward", [&]() -> absl::Status {
    SetHandle(y_mem_, y);
    SetHandle(dy_mem_, dy);
    SetHandle(dx_mem_, dx);
    return engine_->Execute("ReLU backward", bwd_, bwd_args_);
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
