#include "compute/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

using dnnl::prop_kind;

}  // namespace

absl::StatusOr<std::unique_ptr<LayerNormOp>> LayerNormOp::Create(
    const LayerNormShape& shape, Engine* engine) {
  absl::Status status = CheckPositive(
      "LayerNorm", {{"rows", shape.rows}, {"width", shape.width}});
  if (status.ok()) status = CheckEpsilon(shape);
  if (!status.ok()) return status;
  std::unique_ptr<LayerNormOp> op(new LayerNormOp(shape, engine));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status LayerNormOp::Init() {
  return Guard("LayerNorm: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const LayerNormShape& s = shape_;
    memory::desc data_md = F32Desc({s.rows, s.width}, Tag::ab);
    memory::desc stat_md = F32Desc({s.rows}, Tag::a);
    memory::desc param_md = F32Desc({s.width}, Tag::a);
    dnnl::primitive_attr attr = UserScratchpadAttr();
    const dnnl::normalization_flags flags =
        NormalizationFlags(s.scale, s.center);

    mean_.resize(s.rows);
    variance_.resize(s.rows);
    sums_.resize(2 * s.width);
    x_mem_ = UserMemory(data_md, e);
    y_mem_ = UserMemory(data_md, e);
    dy_mem_ = UserMemory(data_md, e);
    dx_mem_ = UserMemory(data_md, e);
    mean_mem_ = UserMemory(stat_md, e);
    var_mem_ = UserMemory(stat_md, e);
    SetHandle(mean_mem_, mean_.data());
    SetHandle(var_mem_, variance_.data());
    gamma_mem_ = UserMemory(param_md, e);
    beta_mem_ = UserMemory(param_md, e);
    dgamma_mem_ = UserMemory(param_md, e);
    dbeta_mem_ = UserMemory(param_md, e);

    // forward_training: the statistics are outputs, kept for Backward.
    dnnl::layer_normalization_forward::primitive_desc fwd_pd(
        dnnl::layer_normalization_forward::desc(
            prop_kind::forward_training, data_md, stat_md, s.epsilon, flags),
        attr, e);
    fwd_ = dnnl::layer_normalization_forward(fwd_pd);
    fwd_args_ = {{DNNL_ARG_SRC, x_mem_},
                 {DNNL_ARG_DST, y_mem_},
                 {DNNL_ARG_MEAN, mean_mem_},
                 {DNNL_ARG_VARIANCE, var_mem_}};
    if (s.scale) fwd_args_[DNNL_ARG_SCALE] = gamma_mem_;
    if (s.center) fwd_args_[DNNL_ARG_SHIFT] = beta_mem_;
    AddScratchpad(fwd_pd, e, &fwd_args_);

    // backward also gives diff_scale / diff_shift; backward_data only dx.
    const prop_kind bwd_kind =
        (s.scale || s.center) ? prop_kind::backward : prop_kind::backward_data;
    dnnl::layer_normalization_backward::primitive_desc bwd_pd(
        dnnl::layer_normalization_backward::desc(bwd_kind, data_md, data_md,
                                                 stat_md, s.epsilon, flags),
        attr, e, fwd_pd);
    bwd_ = dnnl::layer_normalization_backward(bwd_pd);
    bwd_args_ = {{DNNL_ARG_SRC, x_mem_},
                 {DNNL_ARG_MEAN, mean_mem_},
                 {DNNL_ARG_VARIANCE, var_mem_},
                 {DNNL_ARG_DIFF_DST, dy_mem_},
                 {DNNL_ARG_DIFF_SRC, dx_mem_}};
    if (s.scale) {
      bwd_args_[DNNL_ARG_SCALE] = gamma_mem_;
      bwd_args_[DNNL_ARG_DIFF_SCALE] = dgamma_mem_;
    }
    if (s.center) {
      bwd_args_[DNNL_ARG_DIFF_SHIFT] = dbeta_mem_;
      // oneDNN 2.6 lists the shift among the backward inputs when use_shift
      // is set (execution fails without it), though no gradient depends on
      // it: it gets a memory with no buffer, which is never read.
      bwd_args_[DNNL_ARG_SHIFT] = UserMemory(param_md, e);
    }
    AddScratchpad(bwd_pd, e, &bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status LayerNormOp::RunForward(const float* x, const float* gamma,
                                     const float* beta, float* y) {
  return Guard("LayerNorm forward", [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(y_mem_, y);
    if (shape_.scale) SetHandle(gamma_mem_, gamma);
    if (shape_.center) SetHandle(beta_mem_, beta);
    return engine_->Execute("LayerNorm forward", fwd_, fwd_args_);
  });
}

absl::Status LayerNormOp::RunBackward(const float* x, const float* gamma,
                                      const float* dy, float* dx, float* dgamma,
                                      float* dbeta) {
  if (dx == nullptr) {
    ParamGradients(x, dy, dgamma, dbeta);
    return absl::OkStatus();
  }
  return Guard("LayerNorm backward", [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(dy_mem_, dy);
    SetHandle(dx_mem_, dx);
    if (shape_.scale) {
      SetHandle(gamma_mem_, gamma);
      dgamma_mem_.set_data_handle(dgamma);
    }
    if (shape_.center) dbeta_mem_.set_data_handle(dbeta);
    return engine_->Execute("LayerNorm backward", bwd_, bwd_args_);
  });
}

void LayerNormOp::ParamGradients(const float* x, const float* dy, float* dgamma,
                                 float* dbeta) {
  const int64_t width = shape_.width;
  double* dgamma_sum = sums_.data();
  double* dbeta_sum = sums_.data() + width;
  std::fill(sums_.begin(), sums_.end(), 0.0);
  for (int64_t r = 0; r < shape_.rows; ++r) {
    const double mean = mean_[r];
    const double inv_std =
        1.0 / std::sqrt(static_cast<double>(variance_[r]) + shape_.epsilon);
    const float* x_row = x + r * width;
    const float* dy_row = dy + r * width;
    for (int64_t i = 0; i < width; ++i) {
      dgamma_sum[i] += dy_row[i] * ((x_row[i] - mean) * inv_std);
      dbeta_sum[i] += dy_row[i];
    }
  }
  for (int64_t i = 0; i < width; ++i) {
    if (dgamma != nullptr) dgamma[i] = static_cast<float>(dgamma_sum[i]);
    if (dbeta != nullptr) dbeta[i] = static_cast<float>(dbeta_sum[i]);
  }
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
