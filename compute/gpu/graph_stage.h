// One stage of the GPU's LayerGraph (layer_graph.h): the GPU op of a
// StagePlan (compute/layer_plan.h) for one batch size, with the state its
// backward needs: the twin of compute/cpu/graph_stage.h, with the same
// Forward/Backward (graph_stage_base.h) on device pointers of the stage's
// GPU. The
// graph routes values and gradients between stages; a stage only computes.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<GraphStage> stage,
//                            GraphStage::Create(plan, batch, device));
//   PSTRAIN_ASSIGN_OR_RETURN(const void* value,
//                            stage->Forward(inputs, weights, version, &key,
//                                           y));
//   PSTRAIN_RETURN_IF_ERROR(stage->Backward(inputs, y, dy, dx, weights,
//                                           version, gradients));
//
// Ops: cuDNN for Conv2D, MaxPool2D and last-axis softmax (conv2d.h,
// max_pool2d.h, softmax.h), cuBLAS for Dense on any rank (dense.h; the
// plan's rows are the leading axes), pstrain kernels for ReLU, Dropout and
// Embedding (kernels.h) and, in graph_kernels.h, for the other activations,
// the merges, Rescaling, Permute, AveragePooling2D (Keras's "same" may pad
// one more row after than before, which cuDNN's symmetric padding cannot
// express, and the count must exclude the padding), global pooling and
// ZeroPadding2D (kernels.h's pad and crop). Concatenate is strided copies
// (cudaMemcpy2DAsync). A Conv2D's ReLU is a ReLU stage of its own, run in
// place (cuDNN's fused forward has no fused backward to pair with).
//
// BatchNormalization, LayerNormalization and MultiHeadAttention run their
// GPU ops (batch_norm.h, layer_norm.h, attention.h), with the CPU stage's
// conventions: BatchNormalization normalizes with the batch's statistics in
// training and hands them on, times the batch, as its moving statistics'
// "gradients"; attention's key defaults to its value.
//
// Embedding ids are not checked here (see embedding.h): the caller checks
// them on the host before copying them to the device.
//
// All work is enqueued on the device's stream; nothing waits. Not
// thread-safe; see Device. The device must outlive the stage.
#ifndef PSTRAIN_COMPUTE_GPU_GRAPH_STAGE_H_
#define PSTRAIN_COMPUTE_GPU_GRAPH_STAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/gpu/attention.h"
#include "compute/gpu/batch_norm.h"
#include "compute/gpu/conv2d.h"
#include "compute/gpu/dense.h"
#include "compute/gpu/device.h"
#include "compute/gpu/dropout.h"
#include "compute/gpu/embedding.h"
#include "compute/gpu/graph_kernels.h"
#include "compute/gpu/kernel_math.h"
#include "compute/gpu/layer_norm.h"
#include "compute/gpu/max_pool2d.h"
#include "compute/gpu/relu.h"
#include "compute/gpu/softmax.h"
#include "compute/graph_stage_base.h"
#include "compute/layer_graph.h"
#include "compute/layer_plan.h"
#include "compute/stage_layer_ops.h"

namespace pstrain {
namespace worker {
namespace gpu {

// The layer ops both devices call alike (compute/stage_layer_ops.h).
using LayerOps = StageLayerOps<Conv2DOp, MaxPool2DOp, DenseOp, ReluOp,
                               SoftmaxOp, DropoutOp, LayerNormOp, AttentionOp>;

class GraphStage : public GraphStageBase<GraphStage, LayerOps> {
 public:
  // The op of `plan` for `batch` examples on `device`; errors name the
  // layer.
  static absl::StatusOr<std::unique_ptr<GraphStage>> Create(StagePlan plan,
                                                            int64_t batch,
                                                            Device* device);

  // UNIMPLEMENTED naming the layer for a stage the GPU does not compute
  // (yet): what Create refuses before it makes anything.
  static absl::Status Supports(const StagePlan& plan);

 private:
  friend class GraphStageBase<GraphStage, LayerOps>;

  GraphStage(StagePlan plan, int64_t batch, Device* device)
      : GraphStageBase(std::move(plan), batch), device_(device) {}

  // GraphStageBase's hooks: the stages not of LayerOps; making the device
  // current before each pass; skipping the Backward of a stage without
  // variables when no input's gradient is wanted.
  absl::Status OwnForward(const StageCall& call, float* y);
  absl::Status OwnBackward(const StageCall& call);
  absl::Status BeginPass();
  bool SkipsBackward(absl::Span<float* const> dx) const;

  // Sets up what Create's ops do not: kernel geometries.
  absl::Status InitKernelStage();
  // The merge's or concatenation's forward and backward.
  absl::Status MergeForward(absl::Span<const void* const> inputs, float* y);
  absl::Status MergeBackward(absl::Span<const void* const> inputs,
                             const float* dy, absl::Span<float* const> dx);

  Device* const device_;

  std::unique_ptr<EmbeddingOp> embedding_;
  std::unique_ptr<BatchNormOp> batch_norm_;
  // kActivation: elementwise, or softmax / log_softmax along an axis.
  bool axiswise_ = false;
  PointwiseParams pointwise_;
  MergeKind merge_ = MergeKind::kAdd;
  std::vector<int64_t> concat_widths_;  // Per input, floats per row.
  PermuteGeometry permute_forward_;
  PermuteGeometry permute_backward_;
  PadGeometry padding_{};
  AvgPoolGeometry avg_pool_;
  int64_t global_steps_ = 0;
  int64_t global_channels_ = 0;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_GRAPH_STAGE_H_
