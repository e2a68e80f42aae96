// One member's training step of a tensor-parallel model: forward and
// backward on its slices of the split variables (tensor_parallel_plan.h),
// exchanging activations and gradients with the other members of its group
// through a GroupCollective, so that the group computes exactly what one
// process with the whole model computes (compute/cpu/cpu_backend.h).
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelMember> member,
//       TensorParallelMember::Create(spec, plan, group, options));
//   // weights, gradients: this member's part of each variable, in
//   // plan.variables[name].local_shape.
//   PSTRAIN_ASSIGN_OR_RETURN(StepResult r,
//                            member->TrainStep(input, weights, &gradients));
//
// Every member of a group calls TrainStep with the same input (the group's
// batch). Gradients follow compute/backend.h's convention (sums over the
// batch) for the member's part: a split variable's slice, a replicated
// variable's whole gradient (the same on every member). The loss is
// computed on the whole output, the same on every member.
//
// The member runs the CPU's layer-graph executor (compute/layer_graph.h)
// over the member's model (member_model.h: the split layers' parts) with
// TensorParallelStages (tensor_parallel_stage.h), which put the group's
// collectives where the plan says: so any layer graph the CPU backend runs
// (residual branches, LayerNormalization, pooling) runs here, with Dense
// (on the last axis of any rank), MultiHeadAttention and Embedding split as
// tensor_parallel_plan.h describes and every other layer replicated.
//
// Dropout on a split activation draws, for each element, the mask bit the
// unsplit model draws there: its Philox element counter is the element's
// place in the unsplit [global batch, ..., width] activation,
//   (example_offset * rows per example + row) * width + member's first
//   column + column,
// keyed by the layer's global seed (compute/rng_tracker.h), as
// compute/cpu/dropout.h draws it; Dropout on a replicated activation is the
// CPU's. So split == unsplit, dropout included.
//
// This version runs models of one input (float32, or int32 ids for an
// Embedding) without regularizers; Create refuses others naming the layer.
// A member is used by one thread.
#ifndef PSTRAIN_PARALLEL_TENSOR_PARALLEL_MEMBER_H_
#define PSTRAIN_PARALLEL_TENSOR_PARALLEL_MEMBER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/backend.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/losses.h"
#include "compute/rng_tracker.h"
#include "model/model_spec.h"
#include "parallel/group_collective.h"
#include "parallel/tensor_parallel_plan.h"
#include "parallel/tensor_parallel_stage.h"

namespace pstrain {
namespace parallel {

struct TensorParallelMemberOptions {
  // The run's seed (dropout's global streams).
  uint64_t run_seed = 0;
  worker::LossKind loss = worker::LossKind::kSparseCrossEntropy;
  worker::LossInput loss_input = worker::LossInput::kLogits;
  // oneDNN's threads for this member.
  int num_threads = 1;
};

class TensorParallelMember {
 public:
  // INVALID_ARGUMENT for a model this version does not run (naming the
  // layer), or a plan for another group size than `group`'s.
  // `group` must outlive the member.
  static absl::StatusOr<std::unique_ptr<TensorParallelMember>> Create(
      const worker::ModelSpec& spec, const TensorParallelPlan& plan,
      GroupCollective* group, const TensorParallelMemberOptions& options);

  // What Create refuses in a model (INVALID_ARGUMENT naming the layer), for
  // a check before the run.
  static absl::Status CheckModel(const worker::ModelSpec& spec);

  TensorParallelMember(const TensorParallelMember&) = delete;
  TensorParallelMember& operator=(const TensorParallelMember&) = delete;

  const TensorParallelPlan& plan() const { return plan_; }

  // Forward, loss and backward on the group's batch (training: dropout on).
  // INVALID_ARGUMENT for a bad input, or a weight or gradient missing or not
  // in the member's shape; a collective's error as it came.
  absl::StatusOr<worker::StepResult> TrainStep(const worker::StepInput& input,
                                               const worker::Weights& weights,
                                               worker::Gradients* gradients);

  // Forward and loss only, in inference (dropout off).
  absl::StatusOr<worker::StepResult> Evaluate(const worker::StepInput& input,
                                              const worker::Weights& weights);

 private:
  TensorParallelMember(const worker::ModelSpec& spec,
                       const TensorParallelPlan& plan, GroupCollective* group,
                       const TensorParallelMemberOptions& options);

  absl::Status Init();
  // The graph for `batch` examples (made when the batch size changes).
  absl::Status Prepare(int64_t batch);
  // Checks the weights (and gradients, unless null) are the member's parts,
  // and points weight_ptrs_ (gradient_ptrs_) at them in the model's order.
  absl::Status ResolveVariables(const worker::Weights& weights,
                                worker::Gradients* gradients);
  // Forward and the loss; with `training`, dropout on and the output's
  // gradient handed to the graph for Backward.
  absl::StatusOr<worker::StepResult> ForwardAndLoss(
      const worker::StepInput& input, bool training);

  const worker::ModelSpec spec_;  // its final activation the loss's
  const TensorParallelPlan plan_;
  GroupCollective* const group_;
  const TensorParallelMemberOptions options_;
  worker::RngTracker rng_;
  const bool output_is_logits_;
  worker::ModelSpec local_;  // the member's model (member_model.h)
  std::unique_ptr<worker::cpu::Engine> engine_;
  std::unique_ptr<worker::cpu::LabelLoss> loss_;
  TensorParallelContext context_;
  std::unique_ptr<TensorParallelGraph> graph_;
  int64_t batch_ = 0;  // the batch size graph_ is made for
  std::vector<const float*> weight_ptrs_;
  std::vector<float*> gradient_ptrs_;
  std::vector<float> scratch_;
  std::vector<float> output_;   // the model's whole output, when gathered
  std::vector<float> doutput_;  // its gradient
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_MEMBER_H_
