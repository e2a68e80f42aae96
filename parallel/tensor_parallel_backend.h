// A tensor-parallel member behind the worker's Backend interface
// (compute/backend.h), for a training loop that pulls whole variables and
// pushes whole gradients to ps tasks that hold whole variables: it cuts the
// member's parts out of the pulled weights, runs TensorParallelMember, and
// writes gradients that the ps's sum of pushes turns into the group's.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<worker::Backend> backend,
//       TensorParallelBackend::Create(spec, setup.plans[at.model], group,
//                                     options));
//   backend->TrainStep(input, whole_weights, &whole_gradients);
//
// The ps divides the sum of a step's pushes by the sum of their batch sizes,
// and each of a group's M members pushes the group's batch B. So a member
// pushes, for a split variable, M times its slice's gradient with zeros
// elsewhere, and for a replicated one its gradient (the same on every
// member): the group's M pushes sum to M times the group's gradient over
// M * B examples, the group's mean. The loss it reports (the group's, on
// every member) averages the same way. Each member still pulls and pushes
// whole variables (no memory saved on the wire or in the pulled copy): the
// ps holding slices is the next step (issue 21, item 4).
//
// Used by one thread, as a Backend.
#ifndef PSTRAIN_PARALLEL_TENSOR_PARALLEL_BACKEND_H_
#define PSTRAIN_PARALLEL_TENSOR_PARALLEL_BACKEND_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "compute/backend.h"
#include "model/model_spec.h"
#include "parallel/group_collective.h"
#include "parallel/tensor_parallel_member.h"
#include "parallel/tensor_parallel_plan.h"

namespace pstrain {
namespace parallel {

class TensorParallelBackend : public worker::Backend {
 public:
  // TensorParallelMember::Create's errors. `group` must outlive it.
  static absl::StatusOr<std::unique_ptr<worker::Backend>> Create(
      const worker::ModelSpec& spec, const TensorParallelPlan& plan,
      GroupCollective* group, const TensorParallelMemberOptions& options);

  // `weights` and `gradients` whole, as backend.h says; gradients as above.
  absl::StatusOr<worker::StepResult> TrainStep(
      const worker::StepInput& input, const worker::Weights& weights,
      worker::Gradients* gradients) override;

  absl::StatusOr<worker::StepResult> Evaluate(
      const worker::StepInput& input, const worker::Weights& weights) override;

 private:
  TensorParallelBackend(std::unique_ptr<TensorParallelMember> member,
                        const worker::ModelSpec& spec);

  // Cuts the member's parts of `weights` into parts_; INVALID_ARGUMENT for
  // a missing or misshapen variable.
  absl::Status CutParts(const worker::Weights& weights);

  std::unique_ptr<TensorParallelMember> member_;
  const worker::ModelSpec spec_;
  std::map<std::string, Tensor> parts_;           // the member's weights
  std::map<std::string, Tensor> part_gradients_;  // and their gradients
  worker::Weights part_map_;
  worker::Gradients part_gradient_map_;
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_BACKEND_H_
