#include "compute/gpu/device.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_probe.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

// Destructors cannot return a status: report a failed release on stderr
// (it means an earlier asynchronous error or a driver problem).
void ReportReleaseError(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "pstrain gpu: %s\n", status.ToString().c_str());
  }
}

}  // namespace

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { Free(); }

void DeviceBuffer::Free() {
  if (data_ == nullptr) return;
  ReportReleaseError(CudaStatus(cudaFree(data_), "cudaFree"));
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<std::unique_ptr<Device>> CreateDevice(
    int index, const DeviceOptions& options) {
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateDevice: GPU index ", index, " is negative"));
  }
  if (options.workspace_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateDevice: workspace_bytes ", options.workspace_bytes,
                     " is negative"));
  }
  // FAILED_PRECONDITION with the runtime's reason when there is no GPU.
  PSTRAIN_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  if (index >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateDevice: GPU index ", index,
                     " is out of range: this machine has ", count, " GPU(s)"));
  }
  std::unique_ptr<Device> device(new Device(index));
  PSTRAIN_RETURN_IF_ERROR(device->Init(options));
  return device;
}

absl::Status Device::Init(const DeviceOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags"));
  PSTRAIN_RETURN_IF_ERROR(CublasStatus(cublasCreate(&cublas_), "cublasCreate"));
  PSTRAIN_RETURN_IF_ERROR(
      CublasStatus(cublasSetStream(cublas_, stream_), "cublasSetStream"));
  // Plain FP32 (no TF32 tensor cores): results match the CPU to ~1e-6.
  PSTRAIN_RETURN_IF_ERROR(CublasStatus(
      cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&cudnn_), "cudnnCreate"));
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetStream(cudnn_, stream_), "cudnnSetStream"));
  PSTRAIN_ASSIGN_OR_RETURN(workspace_, Allocate(options.workspace_bytes));
  return absl::OkStatus();
}

Device::~Device() {
  if (stream_ == nullptr) return;  // Init failed before creating anything.
  // Release in reverse order of creation, on this device.
  ReportReleaseError(MakeCurrent());
  ReportReleaseError(Synchronize());
  workspace_ = DeviceBuffer();
  if (cudnn_ != nullptr) {
    ReportReleaseError(CudnnStatus(cudnnDestroy(cudnn_), "cudnnDestroy"));
  }
  if (cublas_ != nullptr) {
    ReportReleaseError(CublasStatus(cublasDestroy(cublas_), "cublasDestroy"));
  }
  ReportReleaseError(
      CudaStatus(cudaStreamDestroy(stream_), "cudaStreamDestroy"));
}

absl::Status Device::MakeCurrent() const {
  return CudaStatus(cudaSetDevice(index_),
                    absl::StrCat("cudaSetDevice(", index_, ")"));
}

absl::Status Device::Synchronize() const {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

absl::StatusOr<DeviceBuffer> Device::Allocate(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Device::Allocate: ", bytes, " bytes is negative"));
  }
  if (bytes == 0) return DeviceBuffer();
  PSTRAIN_RETURN_IF_ERROR(MakeCurrent());
  void* data = nullptr;
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaMalloc(&data, static_cast<size_t>(bytes)),
      absl::StrCat("cudaMalloc(", bytes, " bytes) on GPU ", index_)));
  return DeviceBuffer(data, static_cast<size_t>(bytes));
}

absl::Status Device::CopyToDevice(const void* host, size_t bytes,
                                  void* device) {
  if (bytes == 0) return absl::OkStatus();
  PSTRAIN_RETURN_IF_ERROR(MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
      "cudaMemcpyAsync to device"));
  return Synchronize();
}

absl::Status Device::CopyToHost(const void* device, size_t bytes, void* host) {
  if (bytes == 0) return absl::OkStatus();
  PSTRAIN_RETURN_IF_ERROR(MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_),
      "cudaMemcpyAsync to host"));
  return Synchronize();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
