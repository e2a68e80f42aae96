#include "parallel/tensor_parallel_backend.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "parallel/variable_slice.h"

namespace pstrain {
namespace parallel {

absl::StatusOr<std::unique_ptr<worker::Backend>> TensorParallelBackend::Create(
    const worker::ModelSpec& spec, const TensorParallelPlan& plan,
    GroupCollective* group, const TensorParallelMemberOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<TensorParallelMember> member,
      TensorParallelMember::Create(spec, plan, group, options));
  return std::unique_ptr<worker::Backend>(
      new TensorParallelBackend(std::move(member), spec));
}

TensorParallelBackend::TensorParallelBackend(
    std::unique_ptr<TensorParallelMember> member, const worker::ModelSpec& spec)
    : member_(std::move(member)), spec_(spec) {
  for (const auto& [name, var] : member_->plan().variables) {
    parts_.emplace(name, *Tensor::Create(DT_FLOAT, var.local_shape));
    part_gradients_.emplace(name, *Tensor::Create(DT_FLOAT, var.local_shape));
    part_map_[name] = &parts_.at(name);
    part_gradient_map_[name] = &part_gradients_.at(name);
  }
}

absl::Status TensorParallelBackend::CutParts(const worker::Weights& weights) {
  for (const VariableDef& def : spec_.variables) {
    auto w = weights.find(def.name());
    PSTRAIN_RETURN_IF_ERROR(worker::CheckVariableTensor(
        "TensorParallelBackend", "weight", def,
        w == weights.end() ? nullptr : w->second));
    CopySliceOut(w->second->data<float>(),
                 member_->plan().variables.at(def.name()),
                 parts_.at(def.name()).data<float>());
  }
  return absl::OkStatus();
}

absl::StatusOr<worker::StepResult> TensorParallelBackend::TrainStep(
    const worker::StepInput& input, const worker::Weights& weights,
    worker::Gradients* gradients) {
  if (gradients == nullptr) {
    return absl::InvalidArgumentError(
        "TensorParallelBackend: gradients are required");
  }
  for (const VariableDef& def : spec_.variables) {
    auto g = gradients->find(def.name());
    PSTRAIN_RETURN_IF_ERROR(worker::CheckVariableTensor(
        "TensorParallelBackend", "gradient", def,
        g == gradients->end() ? nullptr : g->second));
  }
  PSTRAIN_RETURN_IF_ERROR(CutParts(weights));
  PSTRAIN_ASSIGN_OR_RETURN(
      worker::StepResult result,
      member_->TrainStep(input, part_map_, &part_gradient_map_));
  const float m = static_cast<float>(member_->plan().model_size);
  for (const VariableDef& def : spec_.variables) {
    const MemberVariable& var = member_->plan().variables.at(def.name());
    Tensor* whole = gradients->at(def.name());
    Tensor& part = part_gradients_.at(def.name());
    if (!var.split()) {
      std::copy(part.data<float>(), part.data<float>() + part.num_elements(),
                whole->data<float>());
      continue;
    }
    float* p = part.data<float>();
    for (int64_t i = 0; i < part.num_elements(); ++i) p[i] *= m;
    std::fill(whole->data<float>(),
              whole->data<float>() + whole->num_elements(), 0.0f);
    CopySliceIn(p, var, whole->data<float>());
  }
  return result;
}

absl::StatusOr<worker::StepResult> TensorParallelBackend::Evaluate(
    const worker::StepInput& input, const worker::Weights& weights) {
  PSTRAIN_RETURN_IF_ERROR(CutParts(weights));
  return member_->Evaluate(input, part_map_);
}

}  // namespace parallel
}  // namespace pstrain
