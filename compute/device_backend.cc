#include "compute/device_backend.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/gpu_devices.h"
#include "common/status_macros.h"
#include "compute/cpu/adaptive_threads_backend.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/loss_config.h"
#ifdef PSTRAIN_WITH_CUDA
#include "compute/gpu/gpu_backend.h"
#endif

namespace pstrain {
namespace worker {
namespace {

// The index N of "gpu:N", or -1 for any other name.
int GpuIndex(absl::string_view device) {
  int index = -1;
  if (!absl::ConsumePrefix(&device, "gpu:") ||
      !absl::SimpleAtoi(device, &index) || index < 0) {
    return -1;
  }
  return index;
}

// UNIMPLEMENTED for what the GPU backend does not compute in.
absl::Status CheckGpuPrecision(Precision precision) {
  if (precision == Precision::kFp32) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "--precision=", PrecisionName(precision),
      ": the GPU backend computes in fp32 only for now; use --device=cpu for ",
      PrecisionName(precision), " or --precision=fp32"));
}

absl::StatusOr<DeviceBackend> OnCpu(const ModelSpec& spec,
                                    const DeviceBackendOptions& options,
                                    absl::string_view why) {
  CpuBackendOptions cpu;
  cpu.num_threads = options.cpu_threads;
  cpu.run_seed = options.run_seed;
  cpu.replica = options.replica;
  cpu.loss = options.loss;
  cpu.loss_input = options.loss_input;
  cpu.precision = options.precision;
  DeviceBackend made;
  PSTRAIN_ASSIGN_OR_RETURN(made.backend,
                           CreateAdaptiveThreadsBackend(spec, cpu));
  made.description = absl::StrCat(
      "CPU (oneDNN, ",
      options.cpu_threads == 1
          ? std::string("1 thread")
          : absl::StrCat(options.cpu_threads > 1
                             ? absl::StrCat(options.cpu_threads, " threads")
                             : std::string("a thread per core"),
                         " or 1, whichever is faster now"),
      options.precision == Precision::kBf16 ? ", bf16" : "",
      why.empty() ? "" : "; ", why, ")");
  return made;
}

absl::StatusOr<DeviceBackend> OnGpus(const ModelSpec& spec,
                                     const DeviceBackendOptions& options,
                                     const std::vector<int>& devices) {
  PSTRAIN_RETURN_IF_ERROR(CheckGpuPrecision(options.precision));
#ifdef PSTRAIN_WITH_CUDA
  GpuBackendOptions gpu;
  gpu.devices = devices;
  gpu.run_seed = options.run_seed;
  gpu.replica = options.replica;
  gpu.loss = options.loss;
  gpu.loss_input = options.loss_input;
  DeviceBackend made;
  PSTRAIN_ASSIGN_OR_RETURN(made.backend, CreateGpuBackend(spec, gpu));
  made.description = absl::StrCat(
      devices.size() == 1 ? "GPU " : "GPUs ", absl::StrJoin(devices, ", "),
      " (cuDNN, cuBLAS", devices.size() > 1 ? ", NCCL" : "", ")");
  return made;
#else
  return absl::FailedPreconditionError("built without CUDA");
#endif
}

}  // namespace

absl::Status CheckDeviceName(absl::string_view device) {
  if (device == "auto" || device == "cpu" || device == "gpu" ||
      GpuIndex(device) >= 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--device: \"", device, "\" is not auto, cpu, gpu or gpu:N"));
}

absl::StatusOr<DeviceBackend> CreateDeviceBackend(
    const ModelSpec& spec, const DeviceBackendOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(CheckDeviceName(options.device));
  if (options.device == "cpu") return OnCpu(spec, options, "");
  if (options.device != "auto") {
    // Refused before looking for GPUs: the same answer with or without one.
    absl::Status precision = CheckGpuPrecision(options.precision);
    if (!precision.ok()) {
      return absl::Status(
          precision.code(),
          absl::StrCat("--device=", options.device, ": ", precision.message()));
    }
  }
  const absl::StatusOr<int> count = GpuDeviceCount();
  if (!count.ok()) {
    if (options.device == "auto") {
      return OnCpu(spec, options,
                   absl::StrCat("no GPU: ", count.status().message()));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("--device=", options.device,
                     ": no usable GPU: ", count.status().message()));
  }
  std::vector<int> devices;
  const int index = GpuIndex(options.device);
  if (index >= 0) {
    if (index >= *count) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device=", options.device, ": this machine has ",
                       *count, " GPU", *count == 1 ? "" : "s"));
    }
    devices.push_back(index);
  } else {
    for (int i = 0; i < *count; ++i) devices.push_back(i);
  }
  absl::StatusOr<DeviceBackend> made = OnGpus(spec, options, devices);
  if (!made.ok()) {
    return absl::Status(made.status().code(),
                        absl::StrCat("--device=", options.device, ": ",
                                     made.status().message()));
  }
  return made;
}

}  // namespace worker
}  // namespace pstrain
