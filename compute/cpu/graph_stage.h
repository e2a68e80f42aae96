// One stage of a LayerGraph (layer_graph.h): the CPU op of a StagePlan
// (compute/layer_plan.h) for one batch size, with the state its backward
// needs. The graph routes the values and gradients between stages; a
// stage only computes.
//
// Forward and Backward (graph_stage_base.h) run the layer ops both devices
// share; the rest is here.
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
#include "compute/graph_stage_base.h"
#include "compute/layer_graph.h"
#include "compute/layer_plan.h"
#include "compute/stage_layer_ops.h"

namespace pstrain {
namespace worker {
namespace cpu {

// The layer ops both devices call alike (compute/stage_layer_ops.h).
using LayerOps = StageLayerOps<Conv2DOp, MaxPool2DOp, DenseOp, ReluOp,
                               SoftmaxOp, DropoutOp, LayerNormOp, AttentionOp>;

class GraphStage : public GraphStageBase<GraphStage, LayerOps> {
 public:
  // The op of `plan` for `batch` examples; the layer named in errors.
  static absl::StatusOr<std::unique_ptr<GraphStage>> Create(StagePlan plan,
                                                            int64_t batch,
                                                            Engine* engine);

 private:
  friend class GraphStageBase<GraphStage, LayerOps>;

  GraphStage(StagePlan plan, int64_t batch, int num_threads)
      : GraphStageBase(std::move(plan), batch), num_threads_(num_threads) {}

  // The stages not of LayerOps (graph_stage_base.h).
  absl::Status OwnForward(const StageCall& call, float* y);
  absl::Status OwnBackward(const StageCall& call);

  const int num_threads_;  // The engine's, for our own loops.

  // ops_.relu: also a Conv2D's fused ReLU's backward.
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
