// The CPU's LayerGraph: compute/layer_graph.h's executor over CPU stages
// (graph_stage.h) in host memory, for ONE batch size. CpuBackend
// (cpu_backend.h) keeps one per batch size it meets and adds the loss.
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
// Each Conv2D's ReLU is fused into the convolution as a oneDNN post-op;
// Embedding stages run EmbeddingForward/Backward on the ids of the model
// input they read (ids out of range are INVALID_ARGUMENT from Forward).
//
// Dropout draws its mask from the layer's GLOBAL stream
// (rng.GlobalSeed(layer name), see compute/rng_tracker.h) at Philox offset
// (example_offset + row) * features_per_example + element, so masks do not
// depend on how a global batch is split.
//
// Not thread-safe; see Engine. The engine must outlive the graph.
#ifndef PSTRAIN_COMPUTE_CPU_LAYER_GRAPH_H_
#define PSTRAIN_COMPUTE_CPU_LAYER_GRAPH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/graph_stage.h"
#include "compute/layer_graph.h"

namespace pstrain {
namespace worker {
namespace cpu {

// The CPU's device policy for worker::LayerGraph (see layer_graph.h there):
// stages on oneDNN, buffers as Tensors (64-byte aligned and zero-filled, so
// their pages are touched once, when the graph is made, not in the first
// step), sums in a plain loop.
struct CpuGraphDevice {
  using Context = Engine;
  using Stage = GraphStage;
  using Buffer = Tensor;
  static constexpr bool kFuseConvRelu = true;  // oneDNN's post-op.

  static absl::StatusOr<Tensor> Allocate(Engine* engine, int64_t floats);
  static float* Data(Tensor* buffer) { return buffer->data<float>(); }
  static absl::Status Add(Engine* engine, const float* add, int64_t n,
                          float* sum) {
    for (int64_t i = 0; i < n; ++i) sum[i] += add[i];
    return absl::OkStatus();
  }
};

using LayerGraph = ::pstrain::worker::LayerGraph<CpuGraphDevice>;
using ::pstrain::worker::LayerGraphOptions;

}  // namespace cpu

extern template class LayerGraph<cpu::CpuGraphDevice>;

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_LAYER_GRAPH_H_
