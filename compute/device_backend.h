// The Backend a `--device` setting asks for: the one place that turns
// "auto", "cpu", "gpu" or "gpu:N" into a CPU (oneDNN) or GPU (cuDNN/cuBLAS,
// NCCL across GPUs) backend, for the worker binary and the benchmarks.
//
//   DeviceBackendOptions options;
//   options.device = "auto";
//   options.run_seed = config.seed();
//   PSTRAIN_ASSIGN_OR_RETURN(DeviceBackend made,
//                            CreateDeviceBackend(spec, options));
//   LogInfo(made.description);  // "GPU 0 (cuDNN 9.19.0)", "CPU, 2 threads"...
//
//   cpu     the CPU backend.
//   gpu     every local GPU: the model replicated on each, the batch split
//           across them, the gradients all-reduced with NCCL.
//           FAILED_PRECONDITION with the reason when there is no usable GPU
//           (or the build has no CUDA).
//   gpu:N   GPU N alone; INVALID_ARGUMENT when there is no GPU N.
//   auto    as gpu when there is a usable GPU, else the CPU, and the
//           description says why.
// Anything else is INVALID_ARGUMENT naming the value. The GPU backend
// computes sparse categorical cross-entropy from logits (behind a final
// softmax, or the output itself) and mse; other losses on a GPU (auto
// included) are UNIMPLEMENTED, naming the loss and --device=cpu.
#ifndef PSTRAIN_COMPUTE_DEVICE_BACKEND_H_
#define PSTRAIN_COMPUTE_DEVICE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compute/backend.h"
#include "compute/precision.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {

struct DeviceBackendOptions {
  std::string device = "auto";
  int cpu_threads = 0;  // oneDNN threads; 0: one per core.
  uint64_t run_seed = 0;
  int replica = 0;
  LossKind loss = LossKind::kSparseCrossEntropy;
  LossInput loss_input = LossInput::kLogits;  // Keras's from_logits.
  // kBf16: the CPU backend's mixed precision (FAILED_PRECONDITION on a CPU
  // without AVX-512 BF16 or AMX); the GPU backend refuses it
  // (UNIMPLEMENTED), and so does auto when it would pick a GPU.
  Precision precision = Precision::kFp32;
};

struct DeviceBackend {
  std::unique_ptr<Backend> backend;
  // Where it computes, for a log line: "CPU (...)", "GPU 0", "GPUs 0, 1".
  std::string description;
};

// INVALID_ARGUMENT unless `device` is auto, cpu, gpu or gpu:N (N >= 0):
// what a binary checks before it starts anything.
absl::Status CheckDeviceName(absl::string_view device);

absl::StatusOr<DeviceBackend> CreateDeviceBackend(
    const ModelSpec& spec, const DeviceBackendOptions& options);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_DEVICE_BACKEND_H_
