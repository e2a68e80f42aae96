#include "parallel/tensor_parallel_member.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "compute/layer_plan.h"
#include "compute/loss_config.h"
#include "parallel/member_model.h"
#include "parallel/split_columns.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::LayerSpec;
using worker::ModelSpec;
namespace cpu = worker::cpu;

constexpr absl::string_view kName = "TensorParallelMember";

// A VariableDef of `name` in `shape`, for CheckVariableTensor.
VariableDef LocalDef(const std::string& name,
                     const std::vector<int64_t>& shape) {
  VariableDef def;
  def.set_name(name);
  for (int64_t d : shape) def.mutable_shape()->add_dims(d);
  return def;
}

// `spec` as the member computes it: without the final activation the loss
// reads behind (as CpuBackend computes it).
ModelSpec Computed(const ModelSpec& spec,
                   const TensorParallelMemberOptions& options) {
  ModelSpec computed = spec;
  const worker::LossPlan plan =
      worker::PlanLoss(spec, options.loss, options.loss_input);
  if (plan.strip_final_activation && !computed.outputs.empty()) {
    computed.layers[computed.outputs[0]].activation =
        worker::Activation::kLinear;
  }
  return computed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorParallelMember>>
TensorParallelMember::Create(const ModelSpec& spec,
                             const TensorParallelPlan& plan,
                             GroupCollective* group,
                             const TensorParallelMemberOptions& options) {
  if (group == nullptr || group->size() != plan.model_size ||
      group->rank() != plan.member) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": the plan is member ", plan.member, " of ", plan.model_size,
        ", the group collective ",
        group == nullptr ? std::string("missing")
                         : absl::StrCat("member ", group->rank(), " of ",
                                        group->size())));
  }
  if (plan.layers.size() != spec.layers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": the plan is not the model's"));
  }
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": num_threads must be >= 0"));
  }
  auto member = std::unique_ptr<TensorParallelMember>(
      new TensorParallelMember(spec, plan, group, options));
  PSTRAIN_RETURN_IF_ERROR(member->Init());
  return member;
}

TensorParallelMember::TensorParallelMember(
    const ModelSpec& spec, const TensorParallelPlan& plan,
    GroupCollective* group, const TensorParallelMemberOptions& options)
    : spec_(Computed(spec, options)),
      plan_(plan),
      group_(group),
      options_(options),
      rng_(options.run_seed, /*replica=*/0),
      output_is_logits_(worker::PlanLoss(spec, options.loss, options.loss_input)
                            .output_is_logits) {}

absl::Status TensorParallelMember::CheckModel(const ModelSpec& spec) {
  if (spec.inputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": the model has ", spec.inputs.size(),
                     " inputs; this version runs models of one input"));
  }
  for (const LayerSpec& layer : spec.layers) {
    if (layer.kernel_regularizer.active() || layer.bias_regularizer.active()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kName, ": layer '", layer.name,
                       "': has a regularizer, which this version does not run "
                       "tensor-parallel"));
    }
  }
  if (spec.outputs.size() != 1 || spec.output_shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": the model's output must be one vector per example"));
  }
  // What the CPU's layer planner refuses (the members run its stages).
  const absl::Status planned =
      worker::PlanLayers(spec, worker::LayerPlanOptions(),
                         worker::RngTracker(0, 0))
          .status();
  if (!planned.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": ", planned.message()));
  }
  return absl::OkStatus();
}

absl::Status TensorParallelMember::Init() {
  PSTRAIN_RETURN_IF_ERROR(CheckModel(spec_));
  loss_ = std::make_unique<cpu::LabelLoss>(options_.loss, output_is_logits_,
                                           spec_.output_shape[0]);
  PSTRAIN_ASSIGN_OR_RETURN(local_, MemberModelSpec(spec_, plan_));
  // What the planner refuses, refused now rather than at the first batch.
  worker::LayerPlanOptions plan_options;
  plan_options.drop_final_softmax = false;
  PSTRAIN_RETURN_IF_ERROR(
      worker::PlanLayers(local_, plan_options, rng_).status());
  cpu::EngineOptions engine_options;
  engine_options.num_threads = options_.num_threads;
  PSTRAIN_ASSIGN_OR_RETURN(engine_, cpu::Engine::Create(engine_options));
  context_.engine = engine_.get();
  context_.group = group_;
  context_.spec = &spec_;
  context_.local = &local_;
  context_.plan = &plan_;
  weight_ptrs_.assign(spec_.variables.size(), nullptr);
  gradient_ptrs_.assign(spec_.variables.size(), nullptr);
  return absl::OkStatus();
}

absl::Status TensorParallelMember::Prepare(int64_t batch) {
  if (batch == batch_) return absl::OkStatus();
  graph_.reset();
  context_.stage_layers.clear();
  worker::LayerGraphOptions options;
  options.batch = batch;
  options.drop_final_softmax = false;  // Already out of spec_.
  PSTRAIN_ASSIGN_OR_RETURN(
      graph_, TensorParallelGraph::Create(local_, options, rng_, &context_));
  output_.assign(batch * spec_.output_shape[0], 0.0f);
  doutput_.assign(output_.size(), 0.0f);
  batch_ = batch;
  return absl::OkStatus();
}

absl::Status TensorParallelMember::ResolveVariables(
    const worker::Weights& weights, worker::Gradients* gradients) {
  for (size_t v = 0; v < spec_.variables.size(); ++v) {
    const std::string& name = spec_.variables[v].name();
    const VariableDef def =
        LocalDef(name, plan_.variables.at(name).local_shape);
    auto w = weights.find(name);
    PSTRAIN_RETURN_IF_ERROR(worker::CheckVariableTensor(
        kName, "weight", def, w == weights.end() ? nullptr : w->second));
    weight_ptrs_[v] = w->second->data<float>();
    if (gradients != nullptr) {
      auto d = gradients->find(name);
      PSTRAIN_RETURN_IF_ERROR(worker::CheckVariableTensor(
          kName, "gradient", def, d == gradients->end() ? nullptr : d->second));
      gradient_ptrs_[v] = d->second->data<float>();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<worker::StepResult> TensorParallelMember::ForwardAndLoss(
    const worker::StepInput& input, bool training) {
  worker::DropoutStep key;
  key.step = input.step;
  key.example_offset = input.example_offset;
  const void* features = input.features;
  PSTRAIN_RETURN_IF_ERROR(graph_->Forward(absl::MakeConstSpan(&features, 1),
                                          weight_ptrs_, input.weights_version,
                                          training ? &key : nullptr));
  const int64_t batch = input.batch;
  const float* output = graph_->output();
  if (plan_.gather_output) {
    PSTRAIN_RETURN_IF_ERROR(GatherColumns(group_, output, batch,
                                          graph_->output_size(), &scratch_,
                                          output_.data()));
    output = output_.data();
  }
  float* doutput = nullptr;
  if (training) {
    doutput = plan_.gather_output ? doutput_.data() : graph_->output_gradient();
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      cpu::LabelLoss::Result loss,
      loss_->Compute(output, input.labels, batch, doutput, /*scores=*/nullptr));
  if (training && plan_.gather_output) {
    const int64_t width = graph_->output_size();
    TakeColumns(doutput_.data(), batch, spec_.output_shape[0],
                plan_.member * width, width, graph_->output_gradient());
  }
  worker::StepResult result;
  result.loss_sum = loss.loss_sum;
  result.correct = loss.correct;
  result.examples = batch;
  return result;
}

absl::StatusOr<worker::StepResult> TensorParallelMember::TrainStep(
    const worker::StepInput& input, const worker::Weights& weights,
    worker::Gradients* gradients) {
  PSTRAIN_RETURN_IF_ERROR(worker::CheckStepInput(kName, input, 0));
  if (gradients == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": gradients are required"));
  }
  PSTRAIN_RETURN_IF_ERROR(ResolveVariables(weights, gradients));
  if (input.batch == 0) return worker::StepResult();
  PSTRAIN_RETURN_IF_ERROR(Prepare(input.batch));
  PSTRAIN_ASSIGN_OR_RETURN(worker::StepResult result,
                           ForwardAndLoss(input, /*training=*/true));
  PSTRAIN_RETURN_IF_ERROR(
      graph_->Backward(weight_ptrs_, input.weights_version, gradient_ptrs_));
  return result;
}

absl::StatusOr<worker::StepResult> TensorParallelMember::Evaluate(
    const worker::StepInput& input, const worker::Weights& weights) {
  PSTRAIN_RETURN_IF_ERROR(worker::CheckStepInput(kName, input, 0));
  PSTRAIN_RETURN_IF_ERROR(ResolveVariables(weights, nullptr));
  if (input.batch == 0) return worker::StepResult();
  PSTRAIN_RETURN_IF_ERROR(Prepare(input.batch));
  return ForwardAndLoss(input, /*training=*/false);
}

}  // namespace parallel
}  // namespace pstrain
