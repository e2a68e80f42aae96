// A model's layer graph as ops of one device for ONE batch size, with every
// activation and gradient buffer it needs, so that a training step allocates
// nothing: the executor that the CPU (compute/cpu/layer_graph.h) and the GPU
// (compute/gpu/layer_graph.h) both instantiate, so that both route values
// and gradients through a graph the same way. CpuBackend and GpuBackend keep
// one per batch size (and GPU) and add the loss.
//
//   LayerGraphOptions options;
//   options.batch = 64;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<cpu::LayerGraph> graph,
//                            cpu::LayerGraph::Create(spec, options, rng,
//                                                    engine));
//   DropoutStep key{step, example_offset};
//   PSTRAIN_RETURN_IF_ERROR(graph->Forward({x}, weights, version, &key));
//   ... loss on graph->output(), its gradient into graph->output_gradient()
//   PSTRAIN_RETURN_IF_ERROR(graph->Backward(weights, version, gradients));
//
// The stages are compute/layer_plan.h's, run in the plan's order (each after
// what it reads). Backward runs them in reverse, each writing its inputs'
// gradients into the gradient buffers of the stages that produced them;
// where a stage's output is read by several stages, their contributions are
// summed, as are a shared layer's variables' gradients. Model inputs need no
// gradient; an Embedding stage reads the int32 ids of the input it reads.
//
// Why a template over a device policy rather than a virtual interface: the
// executor's work per stage is a handful of pointer moves, so either would
// do for speed, but the policy keeps each device's stage type concrete (no
// wrapper class per device, no virtual call per op) and lets the compiler
// check that both devices supply the same contract. The policy `D` is a
// struct of types and static functions:
//
//   struct D {
//     using Context = ...;  // What stages are made with (cpu::Engine,
//                           // gpu::Device); outlives the graph.
//     using Stage = ...;    // Stage::Create(StagePlan, batch, Context*)
//                           // -> StatusOr<unique_ptr<Stage>>, plan(),
//                           // Forward and Backward with
//                           // cpu::GraphStage's contract.
//     using Buffer = ...;   // Owning, movable, default-constructible.
//     static constexpr bool kFuseConvRelu;  // LayerPlanOptions'.
//     static absl::StatusOr<Buffer> Allocate(Context*, int64_t floats);
//                           // Zero-filled.
//     static float* Data(Buffer*);
//     static absl::Status Add(Context*, const float* add, int64_t n,
//                             float* sum);  // sum[i] += add[i].
//   };
//
// Every pointer the graph hands out or takes (inputs, weights, gradients,
// output) lives where the device computes: host memory on the CPU, device
// memory of the graph's GPU on the GPU.
//
// The definitions are in layer_graph_impl.h, instantiated once per device
// in that device's layer_graph.cc. Not thread-safe; the context must
// outlive the graph.
#ifndef PSTRAIN_COMPUTE_LAYER_GRAPH_H_
#define PSTRAIN_COMPUTE_LAYER_GRAPH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/layer_plan.h"
#include "compute/rng_tracker.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {

// What keys a training forward pass's dropout masks (see backend.h's
// StepInput).
struct DropoutStep {
  int64_t step = 0;
  int64_t example_offset = 0;
};

struct LayerGraphOptions {
  int64_t batch = 0;
  bool drop_final_softmax = true;
};

template <typename D>
class LayerGraph {
 public:
  using Context = typename D::Context;
  using Stage = typename D::Stage;
  using Buffer = typename D::Buffer;

  // INVALID_ARGUMENT for a non-positive batch, a null context or a spec
  // the planner or the device's stages refuse; the device's failures as
  // their statuses.
  static absl::StatusOr<std::unique_ptr<LayerGraph>> Create(
      const ModelSpec& spec, const LayerGraphOptions& options,
      const RngTracker& rng, Context* context);

  ~LayerGraph();
  LayerGraph(const LayerGraph&) = delete;
  LayerGraph& operator=(const LayerGraph&) = delete;

  int64_t batch() const { return batch_; }
  // Floats per example of output().
  int64_t output_size() const { return output_size_; }
  // The model's inputs.
  int num_inputs() const { return static_cast<int>(inputs_.size()); }

  // Runs the layers on `inputs`, one per model input in spec.inputs' order
  // ([batch, input...]: float32, or int32 ids for one an Embedding reads).
  // `weights` holds spec.variables' buffers in that order, in Keras
  // layouts; `weights_version` changes whenever their values do (kernels
  // reordered for a library are cached per version). `dropout` non-null:
  // training (dropout on, state kept for Backward); null: inference.
  // INVALID_ARGUMENT for a missing input (and, on the CPU, an embedding id
  // out of range).
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
  // `gradients` (spec.variables order, Keras layouts). `gradient_ready`
  // (if set) is called with a variable's index as soon as its gradient is
  // final (every stage that writes it is done, a shared layer's sum
  // added), while Backward goes on with the earlier stages: the last
  // layers' variables first. A variable no stage writes is not reported.
  // FAILED_PRECONDITION unless the last Forward was a training one.
  absl::Status Backward(
      absl::Span<const float* const> weights, uint64_t weights_version,
      absl::Span<float* const> gradients,
      const std::function<void(int variable)>& gradient_ready = nullptr);

 private:
  // One stage: its op and the buffer it owns.
  struct Node {
    std::unique_ptr<Stage> op;
    Buffer y;  // [batch, out_size] unless in place.
    // Set by Forward: what it wrote (null: it passed its input on), and
    // what the stages reading it see.
    float* out = nullptr;
    const void* value = nullptr;

    const StagePlan& plan() const { return op->plan(); }
  };

  LayerGraph(int64_t batch, Context* context)
      : batch_(batch), context_(context) {}

  absl::Status AllocateBuffers();
  absl::Status AllocateVariableScratch(const ModelSpec& spec);
  // Backward of stage `i`, its variables' gradients into `gradients`.
  absl::Status BackwardStage(int i, absl::Span<const float* const> weights,
                             uint64_t weights_version,
                             absl::Span<float* const> gradients);
  // What `ref` holds after Forward, and what the stage of `p` reads.
  const void* Value(const TensorRef& ref) const;
  std::vector<const void*> StageInputs(const StagePlan& p) const;

  const int64_t batch_;
  Context* const context_;
  std::vector<Node> nodes_;
  std::vector<const void*> inputs_;  // The last Forward's.
  int output_stage_ = -1;
  int64_t output_size_ = 0;

  const float* output_ = nullptr;
  // Per stage, the gradient of its output (null when Backward never needs
  // it; an in-place stage's input shares its buffer), and whether this
  // Backward wrote it yet.
  std::vector<float*> gradient_;
  std::vector<Buffer> gradient_buffers_;
  std::vector<bool> written_;
  std::vector<Buffer> scratch_;  // Per input position.
  // Per variable: its elements, written this Backward yet, and the scratch
  // buffer of a variable several stages write (a shared layer's).
  std::vector<int64_t> variable_sizes_;
  std::vector<bool> variable_written_;
  std::vector<Buffer> variable_scratch_;
  // Per variable, the stages that write its gradient, and those still to
  // run this Backward.
  std::vector<int> variable_writers_;
  std::vector<int> variable_pending_;
  bool trained_forward_ = false;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_LAYER_GRAPH_H_
