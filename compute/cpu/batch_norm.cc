#include "compute/cpu/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "compute/cpu/dnnl_util.h"
#include "compute/cpu/parallel.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

using dnnl::normalization_flags;
using dnnl::prop_kind;

// Values (rows * channels) per chunk of the statistics' loops.
constexpr int64_t kChunkValues = 16 * 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<BatchNormOp>> BatchNormOp::Create(
    const BatchNormShape& shape, Engine* engine) {
  absl::Status status = CheckPositive(
      "BatchNorm", {{"rows", shape.rows}, {"channels", shape.channels}});
  if (status.ok()) status = CheckEpsilon(shape);
  if (!status.ok()) return status;
  std::unique_ptr<BatchNormOp> op(new BatchNormOp(shape, engine));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status BatchNormOp::Init() {
  return Guard("BatchNorm: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const BatchNormShape& s = shape_;
    // [rows, channels] is oneDNN's 2D "nc" layout: statistics over n.
    memory::desc data_md = F32Desc({s.rows, s.channels}, Tag::nc);
    memory::desc param_md = F32Desc({s.channels}, Tag::a);
    dnnl::primitive_attr attr = UserScratchpadAttr();
    const normalization_flags flags = NormalizationFlags(s.scale, s.center);

    mean_.resize(s.channels);
    variance_.resize(s.channels);
    sums_.resize(2 * s.channels);
    mean_double_.resize(s.channels);
    // About 16 Ki values a chunk: enough work to share out, few partials.
    rows_per_chunk_ = std::max<int64_t>(1, kChunkValues / s.channels);
    partials_.resize(NumChunks(s.rows, rows_per_chunk_) * 2 * s.channels);
    dx_scale_.resize(s.channels);
    dx_shift_.resize(s.channels);
    dx_slope_.resize(s.channels);
    x_mem_ = UserMemory(data_md, e);
    y_mem_ = UserMemory(data_md, e);
    mean_mem_ = UserMemory(param_md, e);
    var_mem_ = UserMemory(param_md, e);
    SetHandle(mean_mem_, mean_.data());
    SetHandle(var_mem_, variance_.data());
    moving_mean_mem_ = UserMemory(param_md, e);
    moving_var_mem_ = UserMemory(param_md, e);
    gamma_mem_ = UserMemory(param_md, e);
    beta_mem_ = UserMemory(param_md, e);

    // One normalizing primitive for both modes: use_global_stats takes the
    // statistics as inputs (ours in training, the moving ones in inference).
    dnnl::batch_normalization_forward::primitive_desc infer_pd(
        dnnl::batch_normalization_forward::desc(
            prop_kind::forward_inference, data_md, s.epsilon,
            flags | normalization_flags::use_global_stats),
        attr, e);
    normalize_ = dnnl::batch_normalization_forward(infer_pd);
    train_args_ = {{DNNL_ARG_SRC, x_mem_},
                   {DNNL_ARG_DST, y_mem_},
                   {DNNL_ARG_MEAN, mean_mem_},
                   {DNNL_ARG_VARIANCE, var_mem_}};
    infer_args_ = {{DNNL_ARG_SRC, x_mem_},
                   {DNNL_ARG_DST, y_mem_},
                   {DNNL_ARG_MEAN, moving_mean_mem_},
                   {DNNL_ARG_VARIANCE, moving_var_mem_}};
    for (auto* args : {&train_args_, &infer_args_}) {
      if (s.scale) (*args)[DNNL_ARG_SCALE] = gamma_mem_;
      if (s.center) (*args)[DNNL_ARG_SHIFT] = beta_mem_;
    }
    AddScratchpad(infer_pd, e, &train_args_);  // One scratchpad for both.
    auto scratchpad = train_args_.find(DNNL_ARG_SCRATCHPAD);
    if (scratchpad != train_args_.end()) {
      infer_args_[DNNL_ARG_SCRATCHPAD] = scratchpad->second;
    }

    return absl::OkStatus();
  });
}

absl::Status BatchNormOp::RunForwardTraining(const Buffers& b) {
  Statistics(b.x);
  const absl::Status status =
      Guard("BatchNorm forward (training)", [&]() -> absl::Status {
        SetHandle(x_mem_, b.x);
        SetHandle(y_mem_, b.y);
        if (shape_.scale) SetHandle(gamma_mem_, b.gamma);
        if (shape_.center) SetHandle(beta_mem_, b.beta);
        return engine_->Execute("BatchNorm forward (training)", normalize_,
                                train_args_);
      });
  if (!status.ok()) return status;
  if (b.batch_mean != nullptr)
    std::copy(mean_.begin(), mean_.end(), b.batch_mean);
  if (b.batch_var != nullptr) {
    std::copy(variance_.begin(), variance_.end(), b.batch_var);
  }
  return absl::OkStatus();
}

absl::Status BatchNormOp::RunForwardInference(const Buffers& b) {
  return Guard("BatchNorm forward (inference)", [&]() -> absl::Status {
    SetHandle(x_mem_, b.x);
    SetHandle(y_mem_, b.y);
    SetHandle(moving_mean_mem_, b.moving_mean);
    SetHandle(moving_var_mem_, b.moving_var);
    if (shape_.scale) SetHandle(gamma_mem_, b.gamma);
    if (shape_.center) SetHandle(beta_mem_, b.beta);
    return engine_->Execute("BatchNorm forward (inference)", normalize_,
                            infer_args_);
  });
}

absl::Status BatchNormOp::RunBackward(const Buffers& b) {
  const int64_t rows = shape_.rows, channels = shape_.channels;
  const int threads = engine_->num_threads();
  // Per channel and chunk of rows: sum dy * (x - mean) and sum dy; then the
  // chunks' partial sums in chunk order (the same bits on any thread count).
  ParallelChunks(threads, rows, rows_per_chunk_,
                 [&](int64_t k, int64_t begin, int64_t end) {
                   double* dgamma_part = partials_.data() + k * 2 * channels;
                   double* dbeta_part = dgamma_part + channels;
                   std::fill(dgamma_part, dgamma_part + 2 * channels, 0.0);
                   for (int64_t r = begin; r < end; ++r) {
                     const float* x_row = b.x + r * channels;
                     const float* dy_row = b.dy + r * channels;
                     for (int64_t c = 0; c < channels; ++c) {
                       dgamma_part[c] +=
                           dy_row[c] *
                           (static_cast<double>(x_row[c]) - mean_[c]);
                       dbeta_part[c] += dy_row[c];
                     }
                   }
                 });
  double* dgamma_sum = sums_.data();
  double* dbeta_sum = sums_.data() + channels;
  SumPartials(rows);
  for (int64_t c = 0; c < channels; ++c) {
    const double inv_std =
        1.0 / std::sqrt(static_cast<double>(variance_[c]) + shape_.epsilon);
    if (b.dgamma != nullptr) {
      b.dgamma[c] = static_cast<float>(dgamma_sum[c] * inv_std);
    }
    if (b.dbeta != nullptr) b.dbeta[c] = static_cast<float>(dbeta_sum[c]);
    // dx = a (dy - b - (x - mean) d), with a = gamma / std, b = mean dy
    // and d = sum dy (x - mean) / (var + epsilon) / rows.
    const double g = b.gamma != nullptr ? b.gamma[c] : 1.0;
    dx_scale_[c] = static_cast<float>(g * inv_std);
    dx_shift_[c] = static_cast<float>(dbeta_sum[c] / rows);
    dx_slope_[c] = static_cast<float>(dgamma_sum[c] * inv_std * inv_std / rows);
  }
  if (b.dx == nullptr) return absl::OkStatus();
  ParallelChunks(
      threads, rows, rows_per_chunk_, [&](int64_t, int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* x_row = b.x + r * channels;
          const float* dy_row = b.dy + r * channels;
          float* dx_row = b.dx + r * channels;
          for (int64_t c = 0; c < channels; ++c) {
            dx_row[c] = dx_scale_[c] * (dy_row[c] - dx_shift_[c] -
                                        (x_row[c] - mean_[c]) * dx_slope_[c]);
          }
        }
      });
  return absl::OkStatus();
}

void BatchNormOp::SumPartials(int64_t rows) {
  const int64_t width = 2 * shape_.channels;
  std::fill(sums_.begin(), sums_.end(), 0.0);
  for (int64_t k = 0; k < NumChunks(rows, rows_per_chunk_); ++k) {
    const double* part = partials_.data() + k * width;
    for (int64_t i = 0; i < width; ++i) sums_[i] += part[i];
  }
}

void BatchNormOp::Statistics(const float* x) {
  const int64_t rows = shape_.rows, channels = shape_.channels;
  const int threads = engine_->num_threads();
  double* sum = sums_.data();
  double* squares = sums_.data() + channels;
  // Two passes over chunks of rows, each chunk's partial sums (in
  // partials_, [chunk][sum | squares][channel]) added up in chunk order.
  ParallelChunks(threads, rows, rows_per_chunk_,
                 [&](int64_t k, int64_t begin, int64_t end) {
                   double* part = partials_.data() + k * 2 * channels;
                   std::fill(part, part + 2 * channels, 0.0);
                   for (int64_t r = begin; r < end; ++r) {
                     const float* row = x + r * channels;
                     for (int64_t c = 0; c < channels; ++c) part[c] += row[c];
                   }
                 });
  SumPartials(rows);
  for (int64_t c = 0; c < channels; ++c) sum[c] /= rows;  // Now the mean.
  for (int64_t c = 0; c < channels; ++c) mean_[c] = static_cast<float>(sum[c]);
  // The next pass overwrites sums_: keep the unrounded mean.
  std::copy(sum, sum + channels, mean_double_.begin());
  const double* mean_d = mean_double_.data();
  ParallelChunks(threads, rows, rows_per_chunk_,
                 [&](int64_t k, int64_t begin, int64_t end) {
                   double* part = partials_.data() + k * 2 * channels;
                   std::fill(part, part + 2 * channels, 0.0);
                   double* squares_part = part + channels;
                   for (int64_t r = begin; r < end; ++r) {
                     const float* row = x + r * channels;
                     for (int64_t c = 0; c < channels; ++c) {
                       const double d = row[c] - mean_d[c];
                       squares_part[c] += d * d;
                     }
                   }
                 });
  SumPartials(rows);
  for (int64_t c = 0; c < channels; ++c) {
    variance_[c] = static_cast<float>(squares[c] / rows);
  }
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
