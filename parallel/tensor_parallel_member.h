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
// Dropout on a split activation draws, for each element, the mask bit the
// unsplit model draws there: its Philox element counter is the element's
// place in the unsplit [global batch, width] activation,
//   (example_offset + row) * width + member's first column + column,
// keyed by the layer's global seed (compute/rng_tracker.h), as
// compute/cpu/dropout.h draws it. So split == unsplit, dropout included.
//
// This version runs chains of Flatten, Reshape, Dense, Dropout and
// activation layers on the CPU (oneDNN's matmul for Dense) without
// regularizers; Create refuses other models naming the layer. A member is
// used by one thread.
#ifndef PSTRAIN_PARALLEL_TENSOR_PARALLEL_MEMBER_H_
#define PSTRAIN_PARALLEL_TENSOR_PARALLEL_MEMBER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/backend.h"
#include "compute/cpu/activation.h"
#include "compute/cpu/dense.h"
#include "compute/cpu/dropout.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/losses.h"
#include "compute/rng_tracker.h"
#include "model/model_spec.h"
#include "parallel/group_collective.h"
#include "parallel/tensor_parallel_plan.h"

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
  // What one layer holds for the current batch size.
  struct LayerState {
    int64_t in_width = 0;   // the input as the layer reads it, per example
    int64_t out_width = 0;  // its output as it leaves (a slice when split)
    int64_t full_in = 0;    // the unsplit widths
    int64_t full_out = 0;
    std::unique_ptr<worker::cpu::DenseOp> dense;
    std::unique_ptr<worker::cpu::ActivationOp> activation;  // not ReLU
    std::unique_ptr<worker::cpu::DropoutOp> dropout;        // one row
    std::vector<float> input;  // gathered or sliced input, [batch, in_width]
    std::vector<float> pre;    // before the activation, [batch, out_width]
    std::vector<float> out;    // [batch, out_width]
    std::vector<uint8_t> mask;  // dropout's, [batch, out_width]
    std::vector<float> dinput;  // gradient of `input`
    std::vector<float> dpre;
    std::vector<float> dout;  // gradient of the input as it arrived
    uint64_t dropout_seed = 0;
  };

  TensorParallelMember(const worker::ModelSpec& spec,
                       const TensorParallelPlan& plan, GroupCollective* group,
                       const TensorParallelMemberOptions& options);

  absl::Status Init();
  absl::Status Prepare(int64_t batch);
  // The columns [begin, begin + width) of each row of a [batch, full]
  // matrix into `slice`.
  static void TakeColumns(const float* whole, int64_t batch, int64_t full,
                          int64_t begin, int64_t width, float* slice);
  // All-gather of each member's [batch, width] slice into [batch, M*width].
  absl::Status GatherColumns(const float* slice, int64_t batch, int64_t width,
                             float* whole);
  // Checks the weights (and gradients, unless null) are the member's parts,
  // and points weights_ and biases_ at them.
  absl::Status ResolveVariables(const worker::Weights& weights,
                                worker::Gradients* gradients);
  absl::Status Forward(const worker::StepInput& input, bool training);
  absl::Status Backward(const float* doutput, const worker::StepInput& input,
                        worker::Gradients* gradients);

  const worker::ModelSpec spec_;
  const TensorParallelPlan plan_;
  GroupCollective* const group_;
  const TensorParallelMemberOptions options_;
  worker::RngTracker rng_;
  bool strip_final_activation_ = false;
  bool output_is_logits_ = false;
  std::unique_ptr<worker::cpu::Engine> engine_;
  std::unique_ptr<worker::cpu::LabelLoss> loss_;
  int64_t batch_ = 0;  // the batch size the states are made for
  std::vector<LayerState> layers_;
  std::vector<const float*> weights_;  // per layer: kernel, bias
  std::vector<const float*> biases_;
  std::vector<float> gather_scratch_;
  std::vector<float> output_;   // the model's whole output
  std::vector<float> doutput_;  // its gradient
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_MEMBER_H_
