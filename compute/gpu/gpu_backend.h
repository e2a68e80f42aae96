// The Backend (compute/backend.h) that trains a Keras model (any graph the
// planner takes: several inputs, branches, merges, shared layers) on one
// or more local GPUs with cuDNN, cuBLAS and pstrain's kernels: the GPU twin
// of compute/cpu/cpu_backend.h, with the same inputs, losses, gradient
// convention and dropout masks (see that header), so that a worker's pushes
// do not depend on where it computed them.
//
//   GpuBackendOptions options;
//   options.devices = {0, 1};  // Replicas on GPUs 0 and 1.
//   options.run_seed = run_seed;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
//                            CreateGpuBackend(spec, options));
//   PSTRAIN_ASSIGN_OR_RETURN(StepResult r, backend->TrainStep(in, w, &g));
//
// Inputs, weights and gradients are host memory, as every Backend's. Each
// step copies the weights to every GPU (skipped while weights_version and
// the weights' addresses stay the same, as in an evaluation), splits the
// batch into contiguous slices, one per GPU (batch_split.h), copies each
// slice's model inputs (split from the rows on the host as the CPU does,
// model_input.h) and labels to its GPU, and runs forward, loss and backward
// there through the GPU's LayerGraph (layer_graph.h). Dropout masks are keyed
// by each example's index in the global batch, so any split gives the CPU's
// masks. The gradients are summed across GPUs by an NCCL all-reduce on the
// devices (with one GPU there is nothing to reduce), and the sum is copied back
// once. The L2 penalty's gradient is added on the first GPU only, so it counts
// once.
//
// Device memory: per GPU, the weights and gradients (one buffer each, all
// variables), input buffers, and a layer graph with its activations per
// batch size (a few sizes kept, least recently used dropped).
//
// Embedding ids are checked on the host before they reach a GPU
// (INVALID_ARGUMENT naming the id and its position, and the input when the
// model has several). Labels outside the
// classes are INVALID_ARGUMENT naming the example, as on the CPU.
//
// The GPUs of a step run one after another from the calling thread (each
// step's loss is read back before the next GPU's work is issued); concurrent
// replicas are a possible later speed-up, not a difference in results.
// Like every Backend, used by one thread at a time.
#ifndef PSTRAIN_COMPUTE_GPU_GPU_BACKEND_H_
#define PSTRAIN_COMPUTE_GPU_GPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/backend.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {

struct GpuBackendOptions {
  // The local GPUs to replicate the model on (CUDA indices, no repeats);
  // the batch is split across them.
  std::vector<int> devices = {0};
  // As CpuBackendOptions: the run's seed and this worker's replica index.
  uint64_t run_seed = 0;
  int replica = 0;
  LossKind loss = LossKind::kSparseCrossEntropy;
  LossInput loss_input = LossInput::kLogits;  // Keras's from_logits.
  // Largest batch accepted (larger: INVALID_ARGUMENT); 0: no limit.
  int64_t max_batch = 0;
};

// INVALID_ARGUMENT for options out of range (no devices, a repeated one, a
// negative limit) or a model this backend cannot train (an output that is
// not one vector per example); UNIMPLEMENTED naming the layer for one the
// GPU does not compute yet (gpu::GraphStage::Supports); FAILED_PRECONDITION
// with the CUDA runtime's reason when the machine has no usable GPU; an index
// beyond the GPUs present is INVALID_ARGUMENT. Otherwise the backend, its
// devices, NCCL communicators and weight buffers set up (ops come with the
// first batch of each size).
absl::StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(
    const ModelSpec& spec, const GpuBackendOptions& options);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_GPU_BACKEND_H_
