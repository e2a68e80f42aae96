// The definitions of LayerGraph<D> (layer_graph.h), included only by the
// file of each device that instantiates it (compute/cpu/layer_graph.cc,
// compute/gpu/layer_graph.cc), so that the executor is compiled once per
// device rather than in every file that uses it.
#ifndef PSTRAIN_COMPUTE_LAYER_GRAPH_IMPL_H_
#define PSTRAIN_COMPUTE_LAYER_GRAPH_IMPL_H_

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/layer_graph.h"

namespace pstrain {
namespace worker {
namespace layer_graph_internal {

// The variables whose gradients the stage of `p` writes.
inline std::vector<int> StageVariables(const StagePlan& p) {
  std::vector<int> variables;
  for (const int v : {p.kernel, p.bias, p.moving_mean, p.moving_variance}) {
    if (v >= 0) variables.push_back(v);
  }
  for (const int v : p.attention_variables) {
    if (v >= 0) variables.push_back(v);
  }
  return variables;
}

}  // namespace layer_graph_internal

template <typename D>
LayerGraph<D>::~LayerGraph() = default;

template <typename D>
absl::StatusOr<std::unique_ptr<LayerGraph<D>>> LayerGraph<D>::Create(
    const ModelSpec& spec, const LayerGraphOptions& options,
    const RngTracker& rng, Context* context) {
  if (options.batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerGraph: batch must be positive, got ", options.batch));
  }
  if (context == nullptr) {
    return absl::InvalidArgumentError("LayerGraph: a device is required");
  }
  LayerPlanOptions plan_options;
  plan_options.drop_final_softmax = options.drop_final_softmax;
  plan_options.fuse_conv_relu = D::kFuseConvRelu;
  PSTRAIN_ASSIGN_OR_RETURN(LayerPlan plan, PlanLayers(spec, plan_options, rng));
  std::unique_ptr<LayerGraph> graph(new LayerGraph(options.batch, context));
  graph->output_stage_ = plan.output;
  graph->output_size_ = plan.output_size;
  graph->inputs_.resize(plan.num_inputs);
  graph->nodes_.reserve(plan.stages.size());
  for (StagePlan& stage_plan : plan.stages) {
    Node node;
    PSTRAIN_ASSIGN_OR_RETURN(
        node.op, Stage::Create(std::move(stage_plan), options.batch, context));
    graph->nodes_.push_back(std::move(node));
  }
  PSTRAIN_RETURN_IF_ERROR(graph->AllocateBuffers());
  PSTRAIN_RETURN_IF_ERROR(graph->AllocateVariableScratch(spec));
  return graph;
}

template <typename D>
absl::Status LayerGraph<D>::AllocateBuffers() {
  const int n = static_cast<int>(nodes_.size());
  gradient_.assign(n, nullptr);
  written_.assign(n, false);
  // Per input position, the largest input gradient that may need one.
  std::vector<int64_t> scratch;
  // Backwards, so that an in-place stage's buffer exists before its input
  // (which it overwrites) shares it.
  for (int i = n - 1; i >= 0; --i) {
    Node& s = nodes_[i];
    const StagePlan& p = s.plan();
    if (!p.in_place) {
      PSTRAIN_ASSIGN_OR_RETURN(s.y, D::Allocate(context_, batch_ * p.out_size));
    }
    if (gradient_[i] == nullptr && (p.in_backward() || i == output_stage_)) {
      PSTRAIN_ASSIGN_OR_RETURN(Buffer buffer,
                               D::Allocate(context_, batch_ * p.out_size));
      gradient_[i] = D::Data(&buffer);
      gradient_buffers_.push_back(std::move(buffer));
    }
    if (p.in_place && p.in_backward()) {
      gradient_[p.inputs[0].index] = gradient_[i];
    }
    for (size_t k = 0; k < p.inputs.size(); ++k) {
      if (scratch.size() <= k) scratch.resize(k + 1, 0);
      if (p.input_needs_dx[k]) {
        scratch[k] = std::max(scratch[k], batch_ * p.in_sizes[k]);
      }
    }
  }
  scratch_.resize(scratch.size());
  for (size_t k = 0; k < scratch.size(); ++k) {
    if (scratch[k] > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(scratch_[k], D::Allocate(context_, scratch[k]));
    }
  }
  return absl::OkStatus();
}

template <typename D>
absl::Status LayerGraph<D>::AllocateVariableScratch(const ModelSpec& spec) {
  // A variable several stages write (a shared layer's) gets a scratch
  // buffer for all but the first.
  const size_t count = spec.variables.size();
  variable_written_.assign(count, false);
  variable_scratch_.resize(count);
  variable_sizes_.assign(count, 0);
  std::vector<int> writers(count, 0);
  for (const Node& node : nodes_) {
    if (!node.plan().in_backward()) continue;
    for (const int v : layer_graph_internal::StageVariables(node.plan())) {
      ++writers[v];
    }
  }
  variable_writers_ = writers;
  for (size_t v = 0; v < count; ++v) {
    int64_t elements = 1;
    for (const int64_t d : spec.variables[v].shape().dims()) elements *= d;
    variable_sizes_[v] = elements;
    if (writers[v] < 2) continue;
    PSTRAIN_ASSIGN_OR_RETURN(variable_scratch_[v],
                             D::Allocate(context_, elements));
  }
  return absl::OkStatus();
}

template <typename D>
const void* LayerGraph<D>::Value(const TensorRef& ref) const {
  return ref.model_input ? inputs_[ref.index] : nodes_[ref.index].value;
}

template <typename D>
std::vector<const void*> LayerGraph<D>::StageInputs(const StagePlan& p) const {
  std::vector<const void*> values;
  values.reserve(p.inputs.size());
  for (const TensorRef& ref : p.inputs) values.push_back(Value(ref));
  return values;
}

template <typename D>
absl::Status LayerGraph<D>::Forward(absl::Span<const void* const> inputs,
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
  for (Node& s : nodes_) {
    const StagePlan& p = s.plan();
    float* y = p.in_place ? nodes_[p.inputs[0].index].out : D::Data(&s.y);
    PSTRAIN_ASSIGN_OR_RETURN(
        s.value,
        s.op->Forward(StageInputs(p), weights, weights_version, dropout, y));
    s.out = s.value == y ? y : nullptr;
  }
  output_ = static_cast<const float*>(nodes_[output_stage_].value);
  trained_forward_ = dropout != nullptr;
  return absl::OkStatus();
}

template <typename D>
absl::Status LayerGraph<D>::Backward(
    absl::Span<const float* const> weights, uint64_t weights_version,
    absl::Span<float* const> gradients,
    const std::function<void(int variable)>& gradient_ready) {
  if (!trained_forward_) {
    return absl::FailedPreconditionError(
        "LayerGraph: Backward needs a training Forward first");
  }
  std::fill(written_.begin(), written_.end(), false);
  written_[output_stage_] = true;
  std::fill(variable_written_.begin(), variable_written_.end(), false);
  variable_pending_ = variable_writers_;
  // What each stage writes its variables' gradients into: `gradients`, or
  // for a variable a stage before (in backward order) wrote already, its
  // scratch buffer, added afterwards: a shared layer's gradients sum.
  std::vector<float*> stage_gradients(gradients.begin(), gradients.end());
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    const StagePlan& p = nodes_[i].plan();
    if (!p.in_backward()) continue;
    if (!written_[i]) {
      return absl::InternalError(absl::StrCat(
          "LayerGraph: no gradient reached layer '", p.layer, "'"));
    }
    const std::vector<int> variables = layer_graph_internal::StageVariables(p);
    for (const int v : variables) {
      stage_gradients[v] =
          variable_written_[v] ? D::Data(&variable_scratch_[v]) : gradients[v];
    }
    PSTRAIN_RETURN_IF_ERROR(
        BackwardStage(i, weights, weights_version, stage_gradients));
    for (const int v : variables) {
      if (variable_written_[v]) {
        PSTRAIN_RETURN_IF_ERROR(D::Add(context_, D::Data(&variable_scratch_[v]),
                                       variable_sizes_[v], gradients[v]));
      }
      variable_written_[v] = true;
      if (--variable_pending_[v] == 0 && gradient_ready) gradient_ready(v);
    }
  }
  return absl::OkStatus();
}

template <typename D>
absl::Status LayerGraph<D>::BackwardStage(
    int i, absl::Span<const float* const> weights, uint64_t weights_version,
    absl::Span<float* const> gradients) {
  Node& s = nodes_[i];
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
    dx[k] = direct ? gradient_[from] : D::Data(&scratch_[k]);
  }
  PSTRAIN_RETURN_IF_ERROR(s.op->Backward(StageInputs(p), s.out, gradient_[i],
                                         dx, weights, weights_version,
                                         gradients));
  for (size_t k = 0; k < n; ++k) {
    if (dx[k] == nullptr) continue;
    const int from = p.inputs[k].index;
    if (via_scratch[k]) {
      PSTRAIN_RETURN_IF_ERROR(
          D::Add(context_, dx[k], batch_ * p.in_sizes[k], gradient_[from]));
    }
    written_[from] = true;
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_LAYER_GRAPH_IMPL_H_
