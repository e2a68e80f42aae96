// A tensor-parallel member behind the worker's Backend interface
// (compute/backend.h), for a training loop that holds only the member's
// parts of split variables: the Trainer pulls and pushes those parts
// (worker/trainer.h's TrainerOptions::parts, ps/dense_part.h), so the
// weights and gradients it passes are part-shaped for split variables
// (tensor_parallel_plan.h's MemberVariable::local_shape) and whole for
// replicated ones.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<worker::Backend> backend,
//       TensorParallelBackend::Create(spec, setup.plans[at.model], group,
//                                     options));
//   backend->TrainStep(input, part_weights, &part_gradients);
//
// Gradients are sums over the group's batch B (backend.h's convention): a
// split variable's part, a replicated variable's whole gradient (the same on
// every member). In a sync step the ps divides each element's summed pushes
// by the summed batch sizes of the pushes that covered it: a split
// variable's element is covered by one member of each of the D groups (D *
// B examples), a replicated one by all D * M workers, whose M pushes per
// group are equal (M * D * B): both come out as the mean over the global
// batch. The loss it reports (the group's, on every member) is the group's.
//
// An embedding table split by vocabulary is the exception: the trainer
// pulls and pushes its touched rows by id into a whole-sized mirror
// (MemberParts leaves it out), so the backend cuts the member's rows out of
// the mirror and writes M times its rows' gradient, zeros elsewhere, into
// the whole-sized gradient: the ps divides a table's rows by the batch
// sizes of all D * M workers' pushes, which the M members' pushes per group
// then sum to the group's.
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

  // `weights` and `gradients` in the member's shapes, as above;
  // INVALID_ARGUMENT naming the variable for a missing or misshapen one.
  absl::StatusOr<worker::StepResult> TrainStep(
      const worker::StepInput& input, const worker::Weights& weights,
      worker::Gradients* gradients) override;

  absl::StatusOr<worker::StepResult> Evaluate(
      const worker::StepInput& input, const worker::Weights& weights) override;

 private:
  TensorParallelBackend(std::unique_ptr<TensorParallelMember> member,
                        const worker::ModelSpec& spec);

  // The member's view of `weights`: the cut tables' parts in place of their
  // mirrors (cut out of them first).
  absl::StatusOr<worker::Weights> CutTables(const worker::Weights& weights);

  std::unique_ptr<TensorParallelMember> member_;
  // Split embedding tables: the member's rows and their gradient.
  std::map<std::string, Tensor> table_parts_;
  std::map<std::string, Tensor> table_part_gradients_;
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_BACKEND_H_
