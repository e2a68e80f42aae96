#include "worker/cpu/layer_graph.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

absl::StatusOr<Tensor> Buffer(int64_t floats) {
  // Tensor buffers are 64-byte aligned and zero-filled, so their pages are
  // touched here, once, rather than in the first step.
  return Tensor::Create(DT_FLOAT, {floats});
}

// The variables whose gradients the stage of `p` writes.
std::vector<int> StageVariables(const StagePlan& p) {
  std::vector<int> variables;
  for (const int v : {p.kernel, p.bias, p.moving_mean, p.moving_variance}) {
    if (v >= 0) variables.push_back(v);
  }
  for (const int v : p.attention_variables) {
    if (v >= 0) variables.push_back(v);
  }
  return variables;
}

}  // namespace

// One stage: its op and the buffers it owns.
struct LayerGraph::Stage {
  std::unique_ptr<GraphStage> op;
  Tensor y;  // [batch, out_size] unless in place.
  // Set by Forward: what it wrote (null: it passed its input on), and what
  // the stages reading it see.
  float* out = nullptr;
  const void* value = nullptr;

  const StagePlan& plan() const { return op->plan(); }
};

LayerGraph::LayerGraph(int64_t batch, Engine* engine)
    : batch_(batch), engine_(engine) {}

LayerGraph::~LayerGraph() = default;

absl::StatusOr<std::unique_ptr<LayerGraph>> LayerGraph::Create(
    const ModelSpec& spec, const LayerGraphOptions& options,
    const RngTracker& rng, Engine* engine) {
  if (options.batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerGraph: batch must be positive, got ", options.batch));
  }
  LayerPlanOptions plan_options;
  plan_options.drop_final_softmax = options.drop_final_softmax;
  plan_options.fuse_conv_relu = true;  // oneDNN's post-op.
  PSTRAIN_ASSIGN_OR_RETURN(LayerPlan plan, PlanLayers(spec, plan_options, rng));
  std::unique_ptr<LayerGraph> graph(new LayerGraph(options.batch, engine));
  graph->output_stage_ = plan.output;
  graph->output_size_ = plan.output_size;
  graph->inputs_.resize(plan.num_inputs);
  for (StagePlan& stage_plan : plan.stages) {
    PSTRAIN_RETURN_IF_ERROR(graph->AddStage(std::move(stage_plan)));
  }
  PSTRAIN_RETURN_IF_ERROR(graph->AllocateBuffers());
  // A variable several stages write (a shared layer's) gets a scratch
  // buffer for all but the first.
  graph->variable_written_.assign(spec.variables.size(), false);
  graph->variable_scratch_.resize(spec.variables.size());
  std::vector<int> writers(spec.variables.size(), 0);
  for (const std::unique_ptr<Stage>& stage : graph->stages_) {
    for (const int v : StageVariables(stage->plan())) ++writers[v];
  }
  for (size_t v = 0; v < writers.size(); ++v) {
    if (writers[v] < 2) continue;
    int64_t elements = 1;
    for (const int64_t d : spec.variables[v].shape().dims()) elements *= d;
    PSTRAIN_ASSIGN_OR_RETURN(graph->variable_scratch_[v], Buffer(elements));
  }
  return graph;
}

absl::Status LayerGraph::AddStage(StagePlan plan) {
  auto stage = std::make_unique<Stage>();
  PSTRAIN_ASSIGN_OR_RETURN(
      stage->op, GraphStage::Create(std::move(plan), batch_, engine_));
  stages_.push_back(std::move(stage));
  return absl::OkStatus();
}

absl::Status LayerGraph::AllocateBuffers() {
  const int n = static_cast<int>(stages_.size());
  gradient_.assign(n, nullptr);
  written_.assign(n, false);
  // Per input position, the largest input gradient that may need one.
  std::vector<int64_t> scratch;
  // Backwards, so that an in-place stage's buffer exists before its input
  // (which it overwrites) shares it.
  for (int i = n - 1; i >= 0; --i) {
    Stage& s = *stages_[i];
    if (!s.plan().in_place) {
      PSTRAIN_ASSIGN_OR_RETURN(s.y, Buffer(batch_ * s.plan().out_size));
    }
    if (gradient_[i] == nullptr &&
        (s.plan().in_backward() || i == output_stage_)) {
      PSTRAIN_ASSIGN_OR_RETURN(Tensor buffer,
                               Buffer(batch_ * s.plan().out_size));
      gradient_[i] = buffer.data<float>();
      gradient_buffers_.push_back(std::move(buffer));
    }
    if (s.plan().in_place && s.plan().in_backward()) {
      gradient_[s.plan().inputs[0].index] = gradient_[i];
    }
    for (size_t k = 0; k < s.plan().inputs.size(); ++k) {
      if (scratch.size() <= k) scratch.resize(k + 1, 0);
      if (s.plan().input_needs_dx[k]) {
        scratch[k] = std::max(scratch[k], batch_ * s.plan().in_sizes[k]);
      }
    }
  }
  scratch_.resize(scratch.size());
  for (size_t k = 0; k < scratch.size(); ++k) {
    if (scratch[k] > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(scratch_[k], Buffer(scratch[k]));
    }
  }
  return absl::OkStatus();
}

const void* LayerGraph::Value(const TensorRef& ref) const {
  return ref.model_input ? inputs_[ref.index] : stages_[ref.index]->value;
}

absl::Status LayerGraph::Forward(absl::Span<const void* const> inputs,
                                 absl::Span<const float* const> weights,
                                 uint64_t weights_version,
                                 const DropoutStep* dropout) {
  if (inputs.size() != inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LayerGraph: ", inputs.size(), " inputs for a model of ",
                     inputs_.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("LayerGraph: input ", i, " is missing"));
    }
    inputs_[i] = inputs[i];
  }
  trained_forward_ = false;
  for (const std::unique_ptr<Stage>& stage_ptr : stages_) {
    Stage& s = *stage_ptr;
    const StagePlan& p = s.plan();
    float* y = p.in_place ? stages_[p.inputs[0].index]->out : s.y.data<float>();
    PSTRAIN_ASSIGN_OR_RETURN(
        s.value,
        s.op->Forward(StageInputs(p), weights, weights_version, dropout, y));
    s.out = s.value == y ? y : nullptr;
  }
  output_ = static_cast<const float*>(stages_[output_stage_]->value);
  trained_forward_ = dropout != nullptr;
  return absl::OkStatus();
}

std::vector<const void*> LayerGraph::StageInputs(const StagePlan& p) const {
  std::vector<const void*> values;
  for (const TensorRef& ref : p.inputs) values.push_back(Value(ref));
  return values;
}

absl::Status LayerGraph::Backward(absl::Span<const float* const> weights,
                                  uint64_t weights_version,
                                  absl::Span<float* const> gradients) {
  if (!trained_forward_) {
    return absl::FailedPreconditionError(
        "LayerGraph: Backward needs a training Forward first");
  }
  std::fill(written_.begin(), written_.end(), false);
  written_[output_stage_] = true;
  std::fill(variable_written_.begin(), variable_written_.end(), false);
  // What each stage writes its variables' gradients into: `gradients`, or
  // for a variable a stage before (in backward order) wrote already, its
  // scratch buffer, added afterwards: a shared layer's gradients sum.
  std::vector<float*> stage_gradients(gradients.begin(), gradients.end());
  for (int i = static_cast<int>(stages_.size()) - 1; i >= 0; --i) {
    const StagePlan& p = stages_[i]->plan();
    if (!p.in_backward()) continue;
    if (!written_[i]) {
      return absl::InternalError(absl::StrCat(
          "LayerGraph: no gradient reached layer '", p.layer, "'"));
    }
    const std::vector<int> variables = StageVariables(p);
    for (const int v : variables) {
      stage_gradients[v] = variable_written_[v]
                               ? variable_scratch_[v].data<float>()
                               : gradients[v];
    }
    PSTRAIN_RETURN_IF_ERROR(
        BackwardStage(i, weights, weights_version, stage_gradients));
    for (const int v : variables) {
      if (variable_written_[v]) {
        float* sum = gradients[v];
        const float* add = variable_scratch_[v].data<float>();
        for (int64_t k = 0; k < variable_scratch_[v].num_elements(); ++k) {
          sum[k] += add[k];
        }
      }
      variable_written_[v] = true;
    }
  }
  return absl::OkStatus();
}

absl::Status LayerGraph::BackwardStage(int i,
                                       absl::Span<const float* const> weights,
                                       uint64_t weights_version,
                                       absl::Span<float* const> gradients) {
  Stage& s = *stages_[i];
  const StagePlan& p = s.plan();
  // Each input's gradient goes straight into its producer's gradient buffer
  // when nothing wrote it yet this Backward (and no earlier input of this
  // stage reads the same producer), else into scratch_[k], added after.
  const size_t n = p.inputs.size();
  std::vector<float*> dx(n, nullptr);
  std::vector<bool> via_scratch(n, false);
  for (size_t k = 0; k < n; ++k) {
    if (!p.input_needs_dx[k]) continue;  // Model inputs need none.
    const int from = p.inputs[k].index;
    bool direct = !written_[from];
    for (size_t j = 0; j < k && direct; ++j) {
      direct = !(p.input_needs_dx[j] && p.inputs[j].index == from);
    }
    via_scratch[k] = !direct;
    dx[k] = direct ? gradient_[from] : scratch_[k].data<float>();
  }
  PSTRAIN_RETURN_IF_ERROR(s.op->Backward(StageInputs(p), s.out, gradient_[i],
                                         dx, weights, weights_version,
                                         gradients));
  for (size_t k = 0; k < n; ++k) {
    if (dx[k] == nullptr) continue;
    const int from = p.inputs[k].index;
    if (via_scratch[k]) {
      float* sum = gradient_[from];
      for (int64_t e = 0; e < batch_ * p.in_sizes[k]; ++e) sum[e] += dx[k][e];
    }
    written_[from] = true;
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
