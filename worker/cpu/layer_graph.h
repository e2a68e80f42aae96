// A model's layer graph as CPU ops for ONE batch size, with every activation
// and gradient buffer it needs, so that a training step allocates nothing.
// CpuBackend (cpu_backend.h) keeps one LayerGraph per batch size it meets
// and adds the loss.
//
//   LayerGraphOptions options;
//   options.batch = 64;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LayerGraph> graph,
//                            LayerGraph::Create(spec, options, rng, engine));
//   DropoutStep key{step, example_offset};
//   PSTRAIN_RETURN_IF_ERROR(graph->Forward({x}, weights, version, &key));
//   ... loss on graph->output(), its gradient into graph->output_gradient()
//   PSTRAIN_RETURN_IF_ERROR(graph->Backward(weights, version, gradients));
//
// The stages are worker/layer_plan.h's, run in the plan's order (each after
// what it reads), with each Conv2D's ReLU fused into the convolution as a
// oneDNN post-op; Embedding stages run EmbeddingForward/Backward on the ids
// of the model input they read. Backward runs the stages in reverse, each
// writing its inputs' gradients into the gradient buffers of the stages that
// produced them; where a stage's output is read by several stages, their
// contributions are summed, as are a shared layer's variables' gradients.
//
// Dropout draws its mask from the layer's GLOBAL stream
// (rng.GlobalSeed(layer name), see worker/rng_tracker.h) at Philox offset
// (example_offset + row) * features_per_example + element, so masks do not
// depend on how a global batch is split.
//
// Not thread-safe; see Engine. The engine must outlive the graph.
#ifndef PSTRAIN_WORKER_CPU_LAYER_GRAPH_H_
#define PSTRAIN_WORKER_CPU_LAYER_GRAPH_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "worker/cpu/engine.h"
#include "worker/cpu/graph_stage.h"
#include "worker/layer_plan.h"
#include "worker/model/keras_model.h"
#include "worker/rng_tracker.h"

namespace pstrain {
namespace worker {
namespace cpu {

struct LayerGraphOptions {
  int64_t batch = 0;
  bool drop_final_softmax = true;
};

class LayerGraph {
 public:
  // INVALID_ARGUMENT for a non-positive batch or a spec the planner or the
  // ops refuse; oneDNN failures as their statuses.
  static absl::StatusOr<std::unique_ptr<LayerGraph>> Create(
      const ModelSpec& spec, const LayerGraphOptions& options,
      const RngTracker& rng, Engine* engine);

  ~LayerGraph();
  LayerGraph(const LayerGraph&) = delete;
  LayerGraph& operator=(const LayerGraph&) = delete;

  int64_t batch() const { return batch_; }
  // Floats per example of output().
  int64_t output_size() const { return output_size_; }

  // Runs the layers on `inputs`, one per model input in spec.inputs' order
  // ([batch, input...]: float32, or int32 ids for one an Embedding reads).
  // `weights` holds spec.variables' buffers in that order, in Keras
  // layouts; `weights_version` changes whenever their values do (kernels
  // reordered for oneDNN are cached per version). `dropout` non-null:
  // training (dropout on, state kept for Backward); null: inference.
  // INVALID_ARGUMENT for a missing input or an embedding id out of range.
  // REQUIRES: inputs, weights and their values stay unchanged until
  // Backward returns.
  absl::Status Forward(absl::Span<const void* const> inputs,
                       absl::Span<const float* const> weights,
                       uint64_t weights_version, const DropoutStep* dropout);

  // [batch, output_size()]: the last Forward's output.
  const float* output() const { return output_; }

  // [batch, output_size()]: where the caller writes d(loss)/d(output()) for
  // Backward.
  float* output_gradient() { return gradient_[output_stage_]; }

  // Gradients of the loss whose output gradient is in output_gradient(),
  // for the last (training) Forward: overwrites every variable's buffer in
  // `gradients` (spec.variables order, Keras layouts). FAILED_PRECONDITION
  // unless the last Forward was a training one.
  absl::Status Backward(absl::Span<const float* const> weights,
                        uint64_t weights_version,
                        absl::Span<float* const> gradients);

 private:
  struct Stage;

  LayerGraph(int64_t batch, Engine* engine);

  // Makes the op of `plan` for this graph's batch size.
  absl::Status AddStage(StagePlan plan);
  absl::Status AllocateBuffers();
  // Backward of stage `i`, its variables' gradients into `gradients`.
  absl::Status BackwardStage(int i, absl::Span<const float* const> weights,
                             uint64_t weights_version,
                             absl::Span<float* const> gradients);
  // What `ref` holds after Forward, and what the stage of `p` reads.
  const void* Value(const TensorRef& ref) const;
  std::vector<const void*> StageInputs(const StagePlan& p) const;

  const int64_t batch_;
  Engine* const engine_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<const void*> inputs_;  // The last Forward's.
  int output_stage_ = -1;
  int64_t output_size_ = 0;

  const float* output_ = nullptr;
  // Per stage, the gradient of its output (null when Backward never needs
  // it; an in-place stage's input shares its buffer), and whether this
  // Backward wrote it yet.
  std::vector<float*> gradient_;
  std::vector<Tensor> gradient_buffers_;
  std::vector<bool> written_;
  std::vector<Tensor> scratch_;  // Per input position.
  // Per variable: written this Backward yet, and the scratch buffer of a
  // variable several stages write (a shared layer's).
  std::vector<bool> variable_written_;
  std::vector<Tensor> variable_scratch_;
  bool trained_forward_ = false;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_CPU_LAYER_GRAPH_H_
