#include "common/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

absl::Status Failed(absl::StatusCode code, absl::string_view call,
                    absl::string_view library, int number,
                    absl::string_view text) {
  return absl::Status(code, absl::StrCat(call, " failed: ", library, " error ",
                                         number, ": ", text));
}

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view call) {
  if (error == cudaSuccess) return absl::OkStatus();
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (error == cudaErrorMemoryAllocation) {
    code = absl::StatusCode::kResourceExhausted;
  } else if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    code = absl::StatusCode::kFailedPrecondition;
  }
  return Failed(code, call, "CUDA", error, cudaGetErrorString(error));
}

absl::Status CublasStatus(cublasStatus_t status, absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return Failed(status == CUBLAS_STATUS_ALLOC_FAILED
                    ? absl::StatusCode::kResourceExhausted
                    : absl::StatusCode::kInternal,
                call, "cuBLAS", status, cublasGetStatusString(status));
}

absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view call) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return Failed(status == CUDNN_STATUS_ALLOC_FAILED
                    ? absl::StatusCode::kResourceExhausted
                    : absl::StatusCode::kInternal,
                call, "cuDNN", status, cudnnGetErrorString(status));
}

absl::Status NcclStatus(ncclResult_t result, absl::string_view call) {
  if (result == ncclSuccess) return absl::OkStatus();
  return Failed(absl::StatusCode::kInternal, call, "NCCL", result,
                ncclGetErrorString(result));
}

}  // namespace pstrain
