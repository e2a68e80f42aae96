// Return codes of the CUDA runtime, cuBLAS, cuDNN and NCCL as absl::Status.
//
// Every call into those libraries is checked; none is ignored (a GPU error
// that is dropped surfaces later as wrong numbers). Use:
//
//   PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&p, n), "cudaMalloc"));
//
// The message names the call and carries the library's own error string.
#ifndef PSTRAIN_COMMON_CUDA_STATUS_H_
#define PSTRAIN_COMMON_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain {

absl::Status CudaStatus(cudaError_t error, absl::string_view call);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view call);
absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view call);
absl::Status NcclStatus(ncclResult_t result, absl::string_view call);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CUDA_STATUS_H_
