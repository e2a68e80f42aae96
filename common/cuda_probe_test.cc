#include "common/cuda_probe.h"

#include <string>

#include "common/cuda_status.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

// Runs without a GPU: the error strings come from the libraries themselves.
TEST(CudaStatus, NamesTheCallAndTheLibraryError) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaMalloc").ok());
  const absl::Status oom = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(oom.message(), "cudaMalloc failed: CUDA error 2: "))
      << oom;
  EXPECT_TRUE(Contains(oom.message(), "out of memory")) << oom;

  const absl::Status blas =
      CublasStatus(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSgemm");
  EXPECT_EQ(blas.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(Contains(blas.message(), "cublasSgemm failed: cuBLAS error 1: "))
      << blas;

  const absl::Status dnn =
      CudnnStatus(CUDNN_STATUS_BAD_PARAM, "cudnnConvolutionForward");
  EXPECT_TRUE(Contains(dnn.message(), "cudnnConvolutionForward failed: cuDNN "))
      << dnn;
  EXPECT_TRUE(Contains(dnn.message(), "BAD_PARAM")) << dnn;

  const absl::Status nccl = NcclStatus(ncclInvalidArgument, "ncclAllReduce");
  EXPECT_TRUE(Contains(nccl.message(), "ncclAllReduce failed: NCCL error 4: "))
      << nccl;
  EXPECT_TRUE(NcclStatus(ncclSuccess, "ncclAllReduce").ok());
}

TEST(CudaProbe, SelfTestOnEveryDevice) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    EXPECT_EQ(count.status().code(), absl::StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "skipped: this machine has no usable GPU ("
                 << count.status().message() << ")";
  }
  for (int device = 0; device < *count; ++device) {
    EXPECT_TRUE(RunCudaSelfTest(device).ok()) << "device " << device;
  }
}

}  // namespace
}  // namespace pstrain
