// One stage of a LayerGraph (layer_graph.h): the CPU op of a StagePlan
// (compute/layer_plan.h) for one batch size, with the state its backward
// needs. The graph routes the values and gradients between stages; a
// stage only computes.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<GraphStage> stage,
//                            GraphStage::Create(plan, batch, engine));
//   PSTRAIN_ASSIGN_OR_RETURN(const void* value,
//                            stage->Forward(inputs, weights, version, &key,
//                            y));
//   PSTRAIN_RETURN_IF_ERROR(stage->Backward(inputs, y, dy, dx, weights,
//                                           version, gradients));
//
// Not thread-safe; see Engine. The engine must outlive the stage.
#ifndef PSTRAIN_COMPUTE_CPU_GRAPH_STAGE_H_
#define PSTRAIN_COMPUTE_CPU_GRAPH_STAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/cpu/activation.h"
#include "compute/cpu/attention.h"
#include "compute/cpu/batch_norm.h"
#include "compute/cpu/conv2d.h"
#include "compute/cpu/dense.h"
#include "compute/cpu/dropout.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/layer_norm.h"
#include "compute/cpu/max_pool2d.h"
#include "compute/cpu/permute.h"
#include "compute/cpu/pool2d.h"
#include "compute/cpu/relu.h"
#include "compute/cpu/softmax.h"
#include "compute/cpu/zero_padding2d.h"
#include "compute/layer_graph.h"
#include "compute/layer_plan.h"
#include "compute/stage_layer_ops.h"

namespace pstrain {
namespace worker {
namespace cpu {

using ::pstrain::worker::DropoutStep;  // compute/layer_graph.h.

// The layer ops both devices call alike (compute/stage_layer_ops.h).
using LayerOps = StageLayerOps<Conv2DOp, MaxPool2DOp, DenseOp, ReluOp,
                               SoftmaxOp, DropoutOp, LayerNormOp, AttentionOp>;

class GraphStage {
 public:
  // The op of `plan` for `batch` examples; the layer named in errors.
  static absl::StatusOr<std::unique_ptr<GraphStage>> Create(StagePlan plan,
                                                            int64_t batch,
                                                            Engine* engine);

  const StagePlan& plan() const { return plan_; }

  // Computes the stage from `inputs` (one per plan().inputs, [batch, ...])
  // into `y` ([batch, out_size]; the input itself for an in-place stage);
  // `weights` are the model's variables in order. `dropout` non-null:
  // training; null: inference. Returns what the stages reading it see: y,
  // or inputs[0] for a Dropout in inference.
  absl::StatusOr<const void*> Forward(absl::Span<const void* const> inputs,
                                      absl::Span<const float* const> weights,
                                      uint64_t weights_version,
                                      const DropoutStep* dropout, float* y);

  // From dy, the gradient of the last (training) Forward's output y (dy may
  // be overwritten), writes each input's gradient into dx[k] (null: not
  // wanted; non-null ones are distinct buffers, but dx[0] may be dy for an
  // in-place stage) and overwrites its variables' gradients in `gradients`
  // (the moving statistics' with the batch's statistics times the batch).
  absl::Status Backward(absl::Span<const void* const> inputs, const float* y,
                        float* dy, absl::Span<float* const> dx,
                        absl::Span<const float* const> weights,
                        uint64_t weights_version,
                        absl::Span<float* const> gradients);

 private:
  GraphStage(StagePlan plan, int64_t batch, int num_threads)
      : plan_(std::move(plan)), batch_(batch), num_threads_(num_threads) {}

  const StagePlan plan_;
  const int64_t batch_;
  const int num_threads_;  // The engine's, for our own loops.

  LayerOps ops_;  // Its relu: also a Conv2D's fused ReLU's.
  std::unique_ptr<ActivationOp> activation_;
  std::unique_ptr<BatchNormOp> batch_norm_;
  std::unique_ptr<AvgPool2DOp> avg_pool_;
  std::unique_ptr<GlobalPoolOp> global_pool_;
  std::unique_ptr<ZeroPadding2DOp> zero_padding_;
  std::unique_ptr<PermuteOp> permute_;
  EmbeddingShape embedding_;
  // BatchNormalization in training: the batch's mean and variance, which
  // Backward hands on as the moving statistics' "gradients".
  std::vector<float> batch_mean_;
  std::vector<float> batch_variance_;
  std::vector<int64_t> concat_widths_;  // Per input, floats per row.
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_GRAPH_STAGE_H_
