#include "parallel/tensor_parallel_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
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
    : member_(std::move(member)) {
  for (const VariableDef& def : spec.variables) {
    const MemberVariable& var = member_->plan().variables.at(def.name());
    if (!def.sparse() || !var.split()) continue;
    table_parts_.emplace(def.name(),
                         *Tensor::Create(DT_FLOAT, var.local_shape));
    table_part_gradients_.emplace(def.name(),
                                  *Tensor::Create(DT_FLOAT, var.local_shape));
  }
}

absl::StatusOr<worker::Weights> TensorParallelBackend::CutTables(
    const worker::Weights& weights) {
  worker::Weights view = weights;
  for (auto& [name, part] : table_parts_) {
    const MemberVariable& var = member_->plan().variables.at(name);
    auto mirror = weights.find(name);
    if (mirror == weights.end() || mirror->second->shape() != var.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("TensorParallelBackend: the embedding table '", name,
                       "' must come whole (its mirror)"));
    }
    CopySliceOut(mirror->second->data<float>(), var, part.data<float>());
    view[name] = &part;
  }
  return view;
}

absl::StatusOr<worker::StepResult> TensorParallelBackend::TrainStep(
    const worker::StepInput& input, const worker::Weights& weights,
    worker::Gradients* gradients) {
  if (gradients == nullptr) {
    return absl::InvalidArgumentError(
        "TensorParallelBackend: gradients are required");
  }
  if (table_parts_.empty()) {
    return member_->TrainStep(input, weights, gradients);
  }
  PSTRAIN_ASSIGN_OR_RETURN(worker::Weights view, CutTables(weights));
  worker::Gradients part_gradients = *gradients;
  for (auto& [name, part] : table_part_gradients_) {
    auto whole = gradients->find(name);
    if (whole == gradients->end() ||
        whole->second->shape() != member_->plan().variables.at(name).shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("TensorParallelBackend: the embedding table '", name,
                       "' needs a whole-sized gradient"));
    }
    part_gradients[name] = &part;
  }
  PSTRAIN_ASSIGN_OR_RETURN(worker::StepResult result,
                           member_->TrainStep(input, view, &part_gradients));
  const float m = static_cast<float>(member_->plan().model_size);
  for (auto& [name, part] : table_part_gradients_) {
    Tensor* whole = gradients->at(name);
    float* p = part.data<float>();
    for (int64_t i = 0; i < part.num_elements(); ++i) p[i] *= m;
    std::fill(whole->data<float>(),
              whole->data<float>() + whole->num_elements(), 0.0f);
    CopySliceIn(p, member_->plan().variables.at(name), whole->data<float>());
  }
  return result;
}

absl::StatusOr<worker::StepResult> TensorParallelBackend::Evaluate(
    const worker::StepInput& input, const worker::Weights& weights) {
  PSTRAIN_ASSIGN_OR_RETURN(worker::Weights view, CutTables(weights));
  return member_->Evaluate(input, view);
}

}  // namespace parallel
}  // namespace pstrain
