// One stage of a tensor-parallel member's layer graph: the CPU's stage
// (compute/cpu/graph_stage.h) of the member's model (member_model.h), with
// the group's collectives around it where the plan (tensor_parallel_plan.h)
// puts them, and the stages the CPU has no op for on a member's part:
//
//   gather_input      an all-gather assembles the split input before the op;
//                     its backward takes the member's columns of dx.
//   slice_input       the member's columns of a whole input (row-parallel);
//                     its backward all-gathers dx.
//   reduce_output     an all-reduce sums the partial outputs; a bias the
//                     layer adds once (a row-parallel Dense's, a
//                     head-parallel attention's output bias) is added after
//                     it, its gradient the column sums of dy.
//   reduce_input_gradient  an all-reduce sums each input's partial dx.
//   Dropout on a split activation: each element's mask bit is drawn at its
//                     place in the unsplit activation (see
//                     tensor_parallel_member.h).
//   vocab-parallel Embedding: the member's rows looked up, zeros for other
//                     ids, an all-reduce; its backward scatters dy into the
//                     member's rows only.
//
// TensorParallelGraphDevice is the device policy of worker::LayerGraph
// (compute/layer_graph.h) over these stages, so the member runs the CPU's
// graph executor (residual branches, summed gradients) unchanged:
//
//   TensorParallelContext context{engine, group, &spec, &local, &plan};
//   PSTRAIN_ASSIGN_OR_RETURN(auto graph, TensorParallelGraph::Create(
//       local, options, rng, &context));
//
// Stages are made in the plan's order by one graph; the context outlives
// it. Not thread-safe.
#ifndef PSTRAIN_PARALLEL_TENSOR_PARALLEL_STAGE_H_
#define PSTRAIN_PARALLEL_TENSOR_PARALLEL_STAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "compute/cpu/dropout.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/graph_stage.h"
#include "compute/layer_graph.h"
#include "compute/layer_plan.h"
#include "model/model_spec.h"
#include "parallel/group_collective.h"
#include "parallel/tensor_parallel_plan.h"

namespace pstrain {
namespace parallel {

// What a member's stages are made with.
struct TensorParallelContext {
  worker::cpu::Engine* engine = nullptr;
  GroupCollective* group = nullptr;
  const worker::ModelSpec* spec = nullptr;   // the whole model
  const worker::ModelSpec* local = nullptr;  // MemberModelSpec(*spec, *plan)
  const TensorParallelPlan* plan = nullptr;
  // The layer of each stage made so far (filled by TensorParallelStage).
  std::vector<std::string> stage_layers;
};

class TensorParallelStage {
 public:
  // INVALID_ARGUMENT naming the layer for a stage the member cannot run.
  static absl::StatusOr<std::unique_ptr<TensorParallelStage>> Create(
      worker::StagePlan plan, int64_t batch, TensorParallelContext* context);

  // The stage as the graph routes it: inputs and output in the member's
  // shapes (a split activation's slice).
  const worker::StagePlan& plan() const { return plan_; }

  // cpu::GraphStage's contract; collectives' errors as they came.
  absl::StatusOr<const void*> Forward(absl::Span<const void* const> inputs,
                                      absl::Span<const float* const> weights,
                                      uint64_t weights_version,
                                      const worker::DropoutStep* dropout,
                                      float* y);
  absl::Status Backward(absl::Span<const void* const> inputs, const float* y,
                        float* dy, absl::Span<float* const> dx,
                        absl::Span<const float* const> weights,
                        uint64_t weights_version,
                        absl::Span<float* const> gradients);

 private:
  enum class Role { kOp, kSplitDropout, kVocabEmbedding };

  TensorParallelStage(worker::StagePlan plan, int64_t batch,
                      TensorParallelContext* context)
      : plan_(std::move(plan)), batch_(batch), context_(context) {}

  // The inputs as the op reads them: input 0 gathered or sliced.
  std::vector<const void*> OpInputs(absl::Span<const void* const> inputs);
  absl::StatusOr<const void*> VocabForward(const int32_t* ids,
                                           const float* table, float* y);
  absl::Status SplitDropoutForward(const float* x,
                                   const worker::DropoutStep& step, float* y);

  const worker::StagePlan plan_;
  const int64_t batch_;
  TensorParallelContext* const context_;
  Role role_ = Role::kOp;
  std::unique_ptr<worker::cpu::GraphStage> op_;
  bool gather_input_ = false;
  bool slice_input_ = false;
  bool reduce_output_ = false;
  bool reduce_input_gradient_ = false;
  std::vector<int64_t> op_in_sizes_;  // per input, per example, as the op
  int64_t rows_ = 0;        // batch times the input's leading dimensions
  int64_t full_width_ = 0;  // the unsplit last axis of the input
  int64_t width_ = 0;       // the member's part of it
  // The bias added once after the sum (a variable index; -1: none), and
  // its width.
  int bias_once_ = -1;
  int64_t bias_width_ = 0;
  std::vector<float> zeros_;          // stands in for that bias in the op
  std::vector<float> bias_gradient_;  // where the op's gradient of it goes
  std::vector<float> input_;          // the gathered or sliced input
  std::vector<float> dinput_;         // its gradient
  std::vector<float> scratch_;        // all-gathers' pieces
  // Dropout on a split activation.
  std::unique_ptr<worker::cpu::DropoutOp> dropout_;  // one row
  std::vector<uint8_t> mask_;
  // Vocab-parallel Embedding: the member's rows [begin, end) of `vocab`.
  int64_t vocab_ = 0;
  int64_t vocab_begin_ = 0;
  int64_t vocab_end_ = 0;
  int64_t dim_ = 0;
};

// The device policy of worker::LayerGraph over TensorParallelStages.
struct TensorParallelGraphDevice {
  using Context = TensorParallelContext;
  using Stage = TensorParallelStage;
  using Buffer = Tensor;
  static constexpr bool kFuseConvRelu = true;

  static absl::StatusOr<Tensor> Allocate(Context* context, int64_t floats);
  static float* Data(Tensor* buffer) { return buffer->data<float>(); }
  static absl::Status Add(Context* context, const float* add, int64_t n,
                          float* sum) {
    for (int64_t i = 0; i < n; ++i) sum[i] += add[i];
    return absl::OkStatus();
  }
};

using TensorParallelGraph = worker::LayerGraph<TensorParallelGraphDevice>;

}  // namespace parallel

namespace worker {
extern template class LayerGraph<parallel::TensorParallelGraphDevice>;
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_STAGE_H_
