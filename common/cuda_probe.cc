#include "common/cuda_probe.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda_probe_kernels.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

struct CudaFree {
  void operator()(float* p) const {
    const cudaError_t error = cudaFree(p);
    if (error != cudaSuccess) {
      std::fprintf(stderr, "pstrain: cudaFree failed: %s\n",
                   cudaGetErrorString(error));
    }
  }
};
using DeviceFloats = std::unique_ptr<float, CudaFree>;

absl::StatusOr<DeviceFloats> CopyToDevice(const std::vector<float>& host) {
  float* p = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&p, host.size() * sizeof(float)), "cudaMalloc"));
  DeviceFloats device(p);
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpy(p, host.data(), host.size() * sizeof(float),
                            cudaMemcpyHostToDevice),
                 "cudaMemcpy to device"));
  return device;
}

absl::Status ExpectNear(const char* what, const std::vector<float>& got,
                        const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > 1e-5f * (1.0f + std::fabs(want[i]))) {
      return absl::InternalError(absl::StrCat(what, ": element ", i, " is ",
                                              got[i], ", the CPU computed ",
                                              want[i]));
    }
  }
  return absl::OkStatus();
}

struct CublasDestroy {
  void operator()(cublasContext* handle) const { cublasDestroy(handle); }
};

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device: ", cudaGetErrorString(error)));
  }
  if (count == 0) {
    return absl::FailedPreconditionError(
        "no CUDA device: cudaGetDeviceCount found none");
  }
  return count;
}

absl::Status RunCudaSelfTest(int device) {
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  constexpr int kN = 4099;  // not a multiple of the block size
  constexpr float kA = 1.5f;
  std::vector<float> x(kN), y(kN), want(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = 0.25f * (i % 97) - 3.0f;
    y[i] = 0.5f * (i % 13);
    want[i] = kA * x[i] + y[i];
  }
  PSTRAIN_ASSIGN_OR_RETURN(DeviceFloats dx, CopyToDevice(x));
  PSTRAIN_ASSIGN_OR_RETURN(DeviceFloats dy, CopyToDevice(y));
  PSTRAIN_ASSIGN_OR_RETURN(DeviceFloats dy_blas, CopyToDevice(y));

  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(LaunchAxpy(kA, dx.get(), dy.get(), kN, nullptr), "AxpyKernel"));

  cublasHandle_t raw_handle = nullptr;
  PSTRAIN_RETURN_IF_ERROR(CublasStatus(cublasCreate(&raw_handle), "cublasCreate"));
  std::unique_ptr<cublasContext, CublasDestroy> handle(raw_handle);
  PSTRAIN_RETURN_IF_ERROR(CublasStatus(
      cublasSaxpy(handle.get(), kN, &kA, dx.get(), 1, dy_blas.get(), 1),
      "cublasSaxpy"));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));

  std::vector<float> got(kN), got_blas(kN);
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy(got.data(), dy.get(), kN * sizeof(float), cudaMemcpyDeviceToHost),
      "cudaMemcpy to host"));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy(got_blas.data(), dy_blas.get(), kN * sizeof(float),
                 cudaMemcpyDeviceToHost),
      "cudaMemcpy to host"));
  PSTRAIN_RETURN_IF_ERROR(ExpectNear("AxpyKernel", got, want));
  return ExpectNear("cublasSaxpy", got_blas, want);
}

}  // namespace pstrain
