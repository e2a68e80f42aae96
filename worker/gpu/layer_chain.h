// A Keras Sequential model's layers as a chain of GPU ops for ONE batch size
// on one GPU, with every activation and gradient buffer it needs in device
// memory, so that a training step allocates nothing: the GPU twin of
// worker/cpu/layer_graph.h, with the same layers, layouts and dropout masks,
// for the models that are one chain of layers (the planner's chain_only);
// activations other than ReLU and softmax, merges and concatenation are
// UNIMPLEMENTED here yet.
// GpuBackend (gpu_backend.h) keeps one chain per batch size and GPU.
//
//   LayerChainOptions options;
//   options.batch = 64;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LayerChain> chain,
//                            LayerChain::Create(spec, options, rng, device));
//   DropoutStep key{step, example_offset};
//   PSTRAIN_RETURN_IF_ERROR(chain->Forward(x, weights, version, &key));
//   ... loss on chain->output(), its gradient into chain->output_gradient()
//   PSTRAIN_RETURN_IF_ERROR(chain->Backward(weights, version, gradients));
//
// Every pointer is a device pointer on the chain's GPU. The stages are
// worker/layer_plan.h's, with each Conv2D's ReLU as a ReLU stage of its own
// run in place (cuDNN's fused forward has no fused backward to pair with).
//
// Embedding ids are not checked here (see embedding.h): the caller checks
// them on the host before copying them to the device.
//
// All work is enqueued on the device's stream; nothing waits. Not
// thread-safe; see Device. The device must outlive the chain.
#ifndef PSTRAIN_WORKER_GPU_LAYER_CHAIN_H_
#define PSTRAIN_WORKER_GPU_LAYER_CHAIN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/gpu/device.h"
#include "worker/layer_plan.h"
#include "worker/model/keras_model.h"
#include "worker/rng_tracker.h"

namespace pstrain {
namespace worker {
namespace gpu {

struct LayerChainOptions {
  int64_t batch = 0;
  bool drop_final_softmax = true;
};

// What keys a training forward pass's dropout masks (see backend.h's
// StepInput).
struct DropoutStep {
  int64_t step = 0;
  int64_t example_offset = 0;
};

class LayerChain {
 public:
  // INVALID_ARGUMENT for a non-positive batch or a spec the ops refuse;
  // CUDA, cuDNN and cuBLAS failures as their statuses.
  static absl::StatusOr<std::unique_ptr<LayerChain>> Create(
      const ModelSpec& spec, const LayerChainOptions& options,
      const RngTracker& rng, Device* device);

  ~LayerChain();
  LayerChain(const LayerChain&) = delete;
  LayerChain& operator=(const LayerChain&) = delete;

  int64_t batch() const { return batch_; }
  // Floats per example of output().
  int64_t output_size() const { return output_size_; }

  // Runs the layers on `features` ([batch, input...] float32, or int32 ids
  // for an Embedding model). `weights` holds spec.variables' buffers in that
  // order, in Keras layouts; `weights_version` changes whenever their values
  // do. `dropout` non-null: training (dropout on, state kept for Backward);
  // null: inference.
  // REQUIRES: features and weights stay unchanged until Backward returns.
  absl::Status Forward(const void* features,
                       absl::Span<const float* const> weights,
                       uint64_t weights_version, const DropoutStep* dropout);

  // [batch, output_size()]: the last Forward's output.
  const float* output() const { return output_; }

  // [batch, output_size()]: where the caller writes d(loss)/d(output()).
  float* output_gradient() { return output_gradient_.floats(); }

  // Gradients of the loss whose output gradient is in output_gradient(),
  // for the last (training) Forward: overwrites every variable's buffer in
  // `gradients` (spec.variables order, Keras layouts). FAILED_PRECONDITION
  // unless the last Forward was a training one.
  absl::Status Backward(absl::Span<const float* const> weights,
                        uint64_t weights_version,
                        absl::Span<float* const> gradients);

 private:
  struct Stage;

  LayerChain(int64_t batch, Device* device);

  // Makes the op of `plan` for this chain's batch size.
  absl::Status AddStage(StagePlan plan);
  absl::Status AllocateBuffers();

  const int64_t batch_;
  Device* const device_;
  std::vector<std::unique_ptr<Stage>> stages_;
  int64_t output_size_ = 0;
  // The first stage with variables: Backward stops there.
  int first_trainable_ = -1;

  const float* output_ = nullptr;
  DeviceBuffer output_gradient_;
  bool trained_forward_ = false;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_GPU_LAYER_CHAIN_H_
