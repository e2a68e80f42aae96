// The GPU's LayerGraph: compute/layer_graph.h's executor over GPU stages
// (graph_stage.h) in the device memory of one GPU, for ONE batch size: the
// same routing, layouts and dropout masks as the CPU's
// (compute/cpu/layer_graph.h). GpuBackend (gpu_backend.h) keeps one per
// batch size and GPU.
//
//   LayerGraphOptions options;
//   options.batch = 64;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LayerGraph> graph,
//                            LayerGraph::Create(spec, options, rng, device));
//   DropoutStep key{step, example_offset};
//   PSTRAIN_RETURN_IF_ERROR(graph->Forward(inputs, weights, version, &key));
//   ... loss on graph->output(), its gradient into graph->output_gradient()
//   PSTRAIN_RETURN_IF_ERROR(graph->Backward(weights, version, gradients));
//
// Every pointer is a device pointer on the graph's GPU. Embedding ids are
// not checked here: the caller checks them on the host before copying them
// to the device. All work is enqueued on the device's stream; nothing
// waits. Not thread-safe; see Device. The device must outlive the graph.
#ifndef PSTRAIN_COMPUTE_GPU_LAYER_GRAPH_H_
#define PSTRAIN_COMPUTE_GPU_LAYER_GRAPH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/gpu/device.h"
#include "compute/gpu/graph_stage.h"
#include "compute/layer_graph.h"

namespace pstrain {
namespace worker {
namespace gpu {

// The GPU's device policy for worker::LayerGraph (see layer_graph.h there):
// stages on cuDNN, cuBLAS and pstrain kernels, buffers from cudaMalloc
// (zeroed once when made, so no stage ever reads uninitialized memory),
// sums by a kernel on the device's stream.
struct GpuGraphDevice {
  using Context = Device;
  using Stage = GraphStage;
  using Buffer = DeviceBuffer;
  // cuDNN's fused convolution + ReLU has no backward to pair with.
  static constexpr bool kFuseConvRelu = false;

  static absl::StatusOr<DeviceBuffer> Allocate(Device* device, int64_t floats);
  static float* Data(DeviceBuffer* buffer) { return buffer->floats(); }
  static absl::Status Add(Device* device, const float* add, int64_t n,
                          float* sum);
};

using LayerGraph = ::pstrain::worker::LayerGraph<GpuGraphDevice>;
using ::pstrain::worker::LayerGraphOptions;

}  // namespace gpu

extern template class LayerGraph<gpu::GpuGraphDevice>;

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_LAYER_GRAPH_H_
