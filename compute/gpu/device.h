// One local GPU as the GPU ops use it: its index, a CUDA stream, a cuBLAS
// and a cuDNN handle bound to that stream, and a workspace for cuDNN,
// allocated once. Every op holds a Device* and enqueues all its work on
// stream(), so the ops of one device run in call order without host waits.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Device> gpu, CreateDevice(0));
//   PSTRAIN_ASSIGN_OR_RETURN(DeviceBuffer x, gpu->Allocate(bytes));
//   PSTRAIN_RETURN_IF_ERROR(gpu->CopyToDevice(host.data(), bytes, x.data()));
//   ... ops (conv2d.h, dense.h, ...) ...
//   PSTRAIN_RETURN_IF_ERROR(gpu->Synchronize());
//
// Without a usable GPU, CreateDevice fails with FAILED_PRECONDITION and the
// CUDA runtime's reason ("no CUDA device: CUDA driver version is
// insufficient for CUDA runtime version"); nothing aborts.
//
// Not thread-safe: one thread at a time uses a Device and the ops on it.
// REQUIRES: the ops and DeviceBuffers of a Device are destroyed before it.
#ifndef PSTRAIN_COMPUTE_GPU_DEVICE_H_
#define PSTRAIN_COMPUTE_GPU_DEVICE_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {
namespace worker {
namespace gpu {

// Device memory from cudaMalloc, freed when the buffer is destroyed.
// Move-only; an empty buffer holds nullptr.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  float* floats() const { return static_cast<float*>(data_); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  friend class Device;
  DeviceBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  void Free();

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceOptions {
  // The cuDNN workspace shared by all ops of the device (they run one after
  // another on its stream). Convolution algorithms needing more are not
  // chosen.
  int64_t workspace_bytes = int64_t{64} << 20;
};

class Device {
 public:
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  int index() const { return index_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  void* workspace() const { return workspace_.data(); }
  size_t workspace_bytes() const { return workspace_.bytes(); }

  // Makes this GPU the calling thread's current device (cudaSetDevice);
  // every op calls it before enqueuing work.
  absl::Status MakeCurrent() const;

  // Waits for all work enqueued on stream(); returns the first error that
  // work raised (kernel faults surface here).
  absl::Status Synchronize() const;

  // `bytes` of uninitialized device memory (RESOURCE_EXHAUSTED when the GPU
  // is full). Zero bytes gives an empty buffer.
  absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes);

  // Copies between host memory and device memory in stream order, and waits
  // for the copy (and all work before it).
  absl::Status CopyToDevice(const void* host, size_t bytes, void* device);
  absl::Status CopyToHost(const void* device, size_t bytes, void* host);

 private:
  friend absl::StatusOr<std::unique_ptr<Device>> CreateDevice(
      int index, const DeviceOptions& options);
  explicit Device(int index) : index_(index) {}
  absl::Status Init(const DeviceOptions& options);

  const int index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceBuffer workspace_;
};

// The GPU `index` (0 .. count - 1) of this machine. FAILED_PRECONDITION with
// the reason when the machine has no usable GPU; INVALID_ARGUMENT for an
// index out of range; otherwise the failing CUDA/cuBLAS/cuDNN call.
absl::StatusOr<std::unique_ptr<Device>> CreateDevice(
    int index, const DeviceOptions& options = DeviceOptions());

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_DEVICE_H_
