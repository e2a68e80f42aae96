#include "parallel/tensor_parallel_stage.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/layer_graph_impl.h"
#include "compute/rng_tracker.h"
#include "parallel/split_columns.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::LayerSpec;
using worker::StageKind;
using worker::StagePlan;

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status StageError(const StagePlan& plan, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("tensor parallel: layer '", plan.layer, "': ", problem));
}

// Whether the member does anything but the op for this layer.
bool Parallel(const ParallelLayer& p) {
  return p.form != ParallelForm::kReplicated || p.gather_input ||
         p.slice_input || p.output_split || p.reduce_output ||
         p.reduce_input_gradient;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorParallelStage>>
TensorParallelStage::Create(StagePlan plan, int64_t batch,
                            TensorParallelContext* context) {
  const worker::ModelSpec& spec = *context->spec;
  const TensorParallelPlan& tp = *context->plan;
  // The layer the stage computes (part of), and whether it is the layer's
  // first stage (its op) rather than an activation after it.
  int layer_index = -1;
  int calls = 0;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (spec.layers[i].name != plan.layer) continue;
    if (layer_index < 0) layer_index = static_cast<int>(i);
    ++calls;
  }
  if (layer_index < 0) return StageError(plan, "is not the model's");
  const ParallelLayer& p = tp.layers[layer_index];
  if (calls > 1 && Parallel(p)) {
    return StageError(plan,
                      "is shared (called twice) and reads or writes a "
                      "split activation, which this version does not "
                      "run");
  }
  bool first = true;
  for (const worker::TensorRef& ref : plan.inputs) {
    if (!ref.model_input && context->stage_layers[ref.index] == plan.layer) {
      first = false;
    }
  }
  context->stage_layers.push_back(plan.layer);
  const LayerSpec& layer = spec.layers[layer_index];
  const LayerSpec& local = context->local->layers[layer_index];
  const int64_t m = tp.model_size;

  std::unique_ptr<TensorParallelStage> stage(
      new TensorParallelStage(plan, batch, context));
  stage->op_in_sizes_ = plan.in_sizes;
  if (!first) {
    // An activation after a Dense: elementwise on what the Dense left.
    PSTRAIN_ASSIGN_OR_RETURN(
        stage->op_, worker::cpu::GraphStage::Create(std::move(plan), batch,
                                                    context->engine));
    return stage;
  }
  stage->gather_input_ = p.gather_input;
  stage->slice_input_ = p.slice_input;
  stage->reduce_output_ = p.reduce_output;
  stage->reduce_input_gradient_ = p.reduce_input_gradient;
  if (!layer.input_shape.empty()) {
    stage->full_width_ = layer.input_shape.back();
    stage->width_ = stage->full_width_ / m;
    stage->rows_ = batch * (Elements(layer.input_shape) / stage->full_width_);
  }
  if (p.gather_input || p.slice_input) {
    stage->op_in_sizes_[0] = Elements(local.input_shape);
    stage->input_.assign(batch * stage->op_in_sizes_[0], 0.0f);
    stage->dinput_.assign(stage->input_.size(), 0.0f);
  }
  if (plan.kind == StageKind::kEmbedding &&
      p.form == ParallelForm::kVocabParallel) {
    const MemberVariable& var = tp.variables.at(layer.variables[0]);
    stage->role_ = Role::kVocabEmbedding;
    stage->vocab_ = layer.input_dim;
    stage->vocab_begin_ = var.begin;
    stage->vocab_end_ = var.end;
    stage->dim_ = layer.output_dim;
    return stage;
  }
  if (plan.kind == StageKind::kDropout && p.output_split) {
    stage->role_ = Role::kSplitDropout;
    PSTRAIN_ASSIGN_OR_RETURN(
        stage->dropout_,
        worker::cpu::DropoutOp::Create(stage->width_, plan.dropout_rate));
    stage->mask_.assign(stage->rows_ * stage->width_, 0);
    return stage;
  }
  if (p.form == ParallelForm::kRowParallel && plan.bias >= 0) {
    stage->bias_once_ = plan.bias;
    stage->bias_width_ = layer.units;
  } else if (p.form == ParallelForm::kHeadParallel && plan.use_bias &&
             plan.attention_variables.size() == 8) {
    stage->bias_once_ = plan.attention_variables[7];
    stage->bias_width_ = plan.output_dim;
  }
  if (stage->bias_once_ >= 0) {
    stage->zeros_.assign(stage->bias_width_, 0.0f);
    stage->bias_gradient_.assign(stage->bias_width_, 0.0f);
  }
  StagePlan op_plan = stage->plan_;
  op_plan.in_sizes = stage->op_in_sizes_;
  op_plan.in_size = op_plan.in_sizes[0];
  PSTRAIN_ASSIGN_OR_RETURN(
      stage->op_, worker::cpu::GraphStage::Create(std::move(op_plan), batch,
                                                  context->engine));
  return stage;
}

std::vector<const void*> TensorParallelStage::OpInputs(
    absl::Span<const void* const> inputs) {
  std::vector<const void*> op_inputs(inputs.begin(), inputs.end());
  if (gather_input_ || slice_input_) op_inputs[0] = input_.data();
  return op_inputs;
}

absl::StatusOr<const void*> TensorParallelStage::VocabForward(
    const int32_t* ids, const float* table, float* y) {
  const int64_t n = batch_ * plan_.in_size;
  std::fill(y, y + n * dim_, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= vocab_) {
      return StageError(
          plan_, absl::StrCat("id ", id, " is outside [0, ", vocab_, ")"));
    }
    if (id < vocab_begin_ || id >= vocab_end_) continue;
    const float* row = table + (id - vocab_begin_) * dim_;
    std::copy(row, row + dim_, y + i * dim_);
  }
  PSTRAIN_RETURN_IF_ERROR(
      context_->group->AllReduceSum(absl::MakeSpan(y, n * dim_)));
  return y;
}

absl::Status TensorParallelStage::SplitDropoutForward(
    const float* x, const worker::DropoutStep& step, float* y) {
  // Row r of the member's [rows, width] slice is row r of the unsplit
  // [rows, full_width] activation, whose element c of the member's columns
  // is drawn at (example_offset * rows per example + r) * full_width +
  // member * width + c, as the unsplit Dropout draws it.
  const int64_t rows_per_example = rows_ / batch_;
  const uint64_t first_column =
      static_cast<uint64_t>(context_->plan->member * width_);
  for (int64_t r = 0; r < rows_; ++r) {
    worker::cpu::DropoutKey key;
    key.seed = plan_.dropout_seed;
    key.step = static_cast<uint64_t>(step.step);
    key.offset =
        static_cast<uint64_t>(step.example_offset * rows_per_example + r) *
            static_cast<uint64_t>(full_width_) +
        first_column;
    PSTRAIN_RETURN_IF_ERROR(
        dropout_->Forward(x + r * width_, key, y + r * width_));
    std::copy(dropout_->mask().begin(), dropout_->mask().end(),
              mask_.begin() + r * width_);
  }
  return absl::OkStatus();
}

absl::StatusOr<const void*> TensorParallelStage::Forward(
    absl::Span<const void* const> inputs,
    absl::Span<const float* const> weights, uint64_t weights_version,
    const worker::DropoutStep* dropout, float* y) {
  switch (role_) {
    case Role::kVocabEmbedding:
      return VocabForward(static_cast<const int32_t*>(inputs[0]),
                          weights[plan_.kernel], y);
    case Role::kSplitDropout:
      if (dropout == nullptr) return inputs[0];
      PSTRAIN_RETURN_IF_ERROR(SplitDropoutForward(
          static_cast<const float*>(inputs[0]), *dropout, y));
      return y;
    case Role::kOp:
      break;
  }
  const float* x = static_cast<const float*>(inputs[0]);
  GroupCollective* group = context_->group;
  if (gather_input_) {
    PSTRAIN_RETURN_IF_ERROR(
        GatherColumns(group, x, rows_, width_, &scratch_, input_.data()));
  } else if (slice_input_) {
    TakeColumns(x, rows_, full_width_, context_->plan->member * width_, width_,
                input_.data());
  }
  std::vector<const float*> op_weights(weights.begin(), weights.end());
  if (bias_once_ >= 0) op_weights[bias_once_] = zeros_.data();
  PSTRAIN_ASSIGN_OR_RETURN(
      const void* value,
      op_->Forward(OpInputs(inputs), op_weights, weights_version, dropout, y));
  if (!reduce_output_) return value;
  const int64_t n = batch_ * plan_.out_size;
  PSTRAIN_RETURN_IF_ERROR(group->AllReduceSum(absl::MakeSpan(y, n)));
  if (bias_once_ >= 0) {
    const float* bias = weights[bias_once_];
    for (int64_t i = 0; i < n; ++i) y[i] += bias[i % bias_width_];
  }
  return y;
}

absl::Status TensorParallelStage::Backward(
    absl::Span<const void* const> inputs, const float* y, float* dy,
    absl::Span<float* const> dx, absl::Span<const float* const> weights,
    uint64_t weights_version, absl::Span<float* const> gradients) {
  switch (role_) {
    case Role::kVocabEmbedding: {
      // dtable = 0, then the member's rows += dy of the ids in them.
      float* dtable = gradients[plan_.kernel];
      std::fill(dtable, dtable + (vocab_end_ - vocab_begin_) * dim_, 0.0f);
      const int32_t* ids = static_cast<const int32_t*>(inputs[0]);
      for (int64_t i = 0; i < batch_ * plan_.in_size; ++i) {
        if (ids[i] < vocab_begin_ || ids[i] >= vocab_end_) continue;
        float* row = dtable + (ids[i] - vocab_begin_) * dim_;
        for (int64_t c = 0; c < dim_; ++c) row[c] += dy[i * dim_ + c];
      }
      return absl::OkStatus();
    }
    case Role::kSplitDropout:
      if (dx[0] != nullptr) {
        const float scale = dropout_->scale();
        for (int64_t k = 0; k < rows_ * width_; ++k) {
          dx[0][k] = mask_[k] ? dy[k] * scale : 0.0f;
        }
      }
      return absl::OkStatus();
    case Role::kOp:
      break;
  }
  std::vector<const float*> op_weights(weights.begin(), weights.end());
  std::vector<float*> op_gradients(gradients.begin(), gradients.end());
  if (bias_once_ >= 0) {
    // The bias was added once, to the sum: its gradient is the column sums
    // of the whole dy, the same on every member (dy may be overwritten by
    // the op, so first).
    float* db = gradients[bias_once_];
    std::fill(db, db + bias_width_, 0.0f);
    const int64_t n = batch_ * plan_.out_size;
    for (int64_t i = 0; i < n; ++i) db[i % bias_width_] += dy[i];
    op_weights[bias_once_] = zeros_.data();
    op_gradients[bias_once_] = bias_gradient_.data();
  }
  std::vector<float*> op_dx(dx.begin(), dx.end());
  if ((gather_input_ || slice_input_) && dx[0] != nullptr) {
    op_dx[0] = dinput_.data();
  }
  PSTRAIN_RETURN_IF_ERROR(op_->Backward(OpInputs(inputs), y, dy, op_dx,
                                        op_weights, weights_version,
                                        op_gradients));
  GroupCollective* group = context_->group;
  if (reduce_input_gradient_) {
    for (size_t k = 0; k < op_dx.size(); ++k) {
      if (op_dx[k] == nullptr) continue;
      PSTRAIN_RETURN_IF_ERROR(group->AllReduceSum(
          absl::MakeSpan(op_dx[k], batch_ * op_in_sizes_[k])));
    }
  }
  if (dx[0] == nullptr) return absl::OkStatus();
  if (gather_input_) {
    TakeColumns(dinput_.data(), rows_, full_width_,
                context_->plan->member * width_, width_, dx[0]);
  } else if (slice_input_) {
    PSTRAIN_RETURN_IF_ERROR(
        GatherColumns(group, dinput_.data(), rows_, width_, &scratch_, dx[0]));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TensorParallelGraphDevice::Allocate(Context* /*context*/,
                                                           int64_t floats) {
  return Tensor::Create(DT_FLOAT, {floats});
}

}  // namespace parallel

namespace worker {
template class LayerGraph<parallel::TensorParallelGraphDevice>;
}  // namespace worker
}  // namespace pstrain
