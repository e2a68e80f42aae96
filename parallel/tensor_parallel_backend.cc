#include "parallel/tensor_parallel_backend.h"

#include <utility>

#include "common/status_macros.h"

namespace pstrain {
namespace parallel {

absl::StatusOr<std::unique_ptr<worker::Backend>> TensorParallelBackend::Create(
    const worker::ModelSpec& spec, const TensorParallelPlan& plan,
    GroupCollective* group, const TensorParallelMemberOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<TensorParallelMember> member,
      TensorParallelMember::Create(spec, plan, group, options));
  return std::unique_ptr<worker::Backend>(
      new TensorParallelBackend(std::move(member)));
}

TensorParallelBackend::TensorParallelBackend(
    std::unique_ptr<TensorParallelMember> member)
    : member_(std::move(member)) {}

absl::StatusOr<worker::StepResult> TensorParallelBackend::TrainStep(
    const worker::StepInput& input, const worker::Weights& weights,
    worker::Gradients* gradients) {
  if (gradients == nullptr) {
    return absl::InvalidArgumentError(
        "TensorParallelBackend: gradients are required");
  }
  return member_->TrainStep(input, weights, gradients);
}

absl::StatusOr<worker::StepResult> TensorParallelBackend::Evaluate(
    const worker::StepInput& input, const worker::Weights& weights) {
  return member_->Evaluate(input, weights);
}

}  // namespace parallel
}  // namespace pstrain
