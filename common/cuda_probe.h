// Finding and checking the GPUs of this machine.
//
// Binaries call CudaDeviceCount() to decide --device=auto (fall back to the
// CPU, with the returned reason in one log line) and --device=gpu (fail with
// it). RunCudaSelfTest() runs a kernel and a cuBLAS call on one device and
// compares them with the CPU: the first thing to run on a new GPU machine.
#ifndef PSTRAIN_COMMON_CUDA_PROBE_H_
#define PSTRAIN_COMMON_CUDA_PROBE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

// Number of usable CUDA devices (> 0), or FAILED_PRECONDITION saying why there
// is none ("no CUDA device: CUDA driver version is insufficient ...").
absl::StatusOr<int> CudaDeviceCount();

// Runs y = a * x + y with our own kernel and with cuBLAS on `device` and
// checks both against the CPU. OK, or a status naming the failing call or the
// first mismatching element.
absl::Status RunCudaSelfTest(int device);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CUDA_PROBE_H_
