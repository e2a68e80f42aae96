// What the CPU's and the GPU's graph stages (compute/cpu/graph_stage.h,
// compute/gpu/graph_stage.h) share: the stage's plan and batch, the layer
// ops both devices call alike (stage_layer_ops.h), and the public Forward
// and Backward, which hand a stage of those ops to them and any other to
// the device's own code. A device's GraphStage derives from it (CRTP):
//
//   class GraphStage : public GraphStageBase<GraphStage, LayerOps> {
//     friend class GraphStageBase<GraphStage, LayerOps>;
//     // The stages this device computes itself; the base names the layer
//     // in their errors.
//     absl::Status OwnForward(const StageCall& call, float* y);
//     absl::Status OwnBackward(const StageCall& call);
//     // Optional, hiding the base's: work before either pass (the GPU
//     // makes its device current), and a Backward with nothing to do.
//     absl::Status BeginPass();
//     bool SkipsBackward(absl::Span<float* const> dx) const;
//   };
//
// Not thread-safe; see the device's GraphStage.
#ifndef PSTRAIN_COMPUTE_GRAPH_STAGE_BASE_H_
#define PSTRAIN_COMPUTE_GRAPH_STAGE_BASE_H_

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/layer_graph.h"
#include "compute/layer_plan.h"

namespace pstrain {
namespace worker {

// One Forward's or Backward's arguments, as GraphStageBase takes them.
struct StageCall {
  absl::Span<const void* const> inputs;
  absl::Span<const float* const> weights;
  uint64_t weights_version = 0;
  const DropoutStep* dropout = nullptr;  // Forward; null: inference.
  // Backward: the last Forward's output, its gradient (may be overwritten),
  // the inputs' gradients (null: not wanted) and the variables'.
  const float* y = nullptr;
  float* dy = nullptr;
  absl::Span<float* const> dx;
  absl::Span<float* const> gradients;
};

template <typename Stage, typename LayerOps>
class GraphStageBase {
 public:
  const StagePlan& plan() const { return plan_; }

  // Computes the stage from `inputs` (one per plan().inputs, [batch, ...])
  // into `y` ([batch, out_size]; the input itself for an in-place stage);
  // `weights` are the model's variables in order. `dropout` non-null:
  // training; null: inference. Returns what the stages reading it see: y,
  // or inputs[0] for a Dropout in inference. Errors name the layer.
  absl::StatusOr<const void*> Forward(absl::Span<const void* const> inputs,
                                      absl::Span<const float* const> weights,
                                      uint64_t weights_version,
                                      const DropoutStep* dropout, float* y) {
    absl::Status status = stage().BeginPass();
    if (!status.ok()) return InLayer(plan_.layer, status);
    if (LayerOps::Runs(plan_.kind)) {
      return ops_.Forward(plan_, inputs, weights, weights_version, dropout, y);
    }
    StageCall call;
    call.inputs = inputs;
    call.weights = weights;
    call.weights_version = weights_version;
    call.dropout = dropout;
    status = stage().OwnForward(call, y);
    if (!status.ok()) return InLayer(plan_.layer, status);
    return y;
  }

  // From dy, the gradient of the last (training) Forward's output y (dy may
  // be overwritten), writes each input's gradient into dx[k] (null: not
  // wanted; non-null ones are distinct buffers, but dx[0] may be dy for an
  // in-place stage) and overwrites its variables' gradients in `gradients`
  // (the moving statistics' with the batch's statistics times the batch).
  absl::Status Backward(absl::Span<const void* const> inputs, const float* y,
                        float* dy, absl::Span<float* const> dx,
                        absl::Span<const float* const> weights,
                        uint64_t weights_version,
                        absl::Span<float* const> gradients) {
    const absl::Status status = stage().BeginPass();
    if (!status.ok()) return InLayer(plan_.layer, status);
    if (stage().SkipsBackward(dx)) return absl::OkStatus();
    if (LayerOps::Runs(plan_.kind)) {
      return ops_.Backward(plan_, inputs, y, dy, dx, weights, weights_version,
                           gradients);
    }
    StageCall call;
    call.inputs = inputs;
    call.weights = weights;
    call.weights_version = weights_version;
    call.y = y;
    call.dy = dy;
    call.dx = dx;
    call.gradients = gradients;
    return InLayer(plan_.layer, stage().OwnBackward(call));
  }

 protected:
  GraphStageBase(StagePlan plan, int64_t batch)
      : plan_(std::move(plan)), batch_(batch) {}

  // The defaults a Stage may hide: no work before a pass, and every
  // Backward runs.
  absl::Status BeginPass() { return absl::OkStatus(); }
  bool SkipsBackward(absl::Span<float* const> /*dx*/) const { return false; }

  const StagePlan plan_;
  const int64_t batch_;
  LayerOps ops_;

 private:
  Stage& stage() { return static_cast<Stage&>(*this); }
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GRAPH_STAGE_BASE_H_
