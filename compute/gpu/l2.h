// Keras's weight regularizers L1, L2 and L1L2 on the GPU, the twin of
// compute/cpu/l2.h: a penalty l1 * sum(|w|) + l2 * sum(square(w)) for the
// loss, and l1 * sign(w) + 2 * l2 * w added to the weights' gradient (see
// there for how pstrain scales it across workers).
//
//   PSTRAIN_ASSIGN_OR_RETURN(double penalty,
//       AddRegularization(w, w_size, r, /*gradient_scale=*/1, dw, device));
//   loss += penalty;
//
// On cuBLAS: the sum of squares is cublasSdot(w, w) and the sum of
// magnitudes cublasSasum (float accumulation in cuBLAS's fixed order,
// deterministic on one GPU model; relative error about 1e-6 against the
// CPU's double sums); dw += 2 l2 w is cublasSaxpy and dw += l1 sign(w) a
// kernel (kernels.h). Waits for the device's stream (it returns the
// penalty). w and dw are device pointers.
#ifndef PSTRAIN_COMPUTE_GPU_L2_H_
#define PSTRAIN_COMPUTE_GPU_L2_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compute/gpu/device.h"
#include "model/model_spec.h"

namespace pstrain {
namespace worker {
namespace gpu {

// Returns l1 * sum_i |w[i]| + l2 * sum_i w[i]^2 and, when dw is not null,
// adds gradient_scale * (l1 * sign(w[i]) + 2 * l2 * w[i]) to dw[i]. 0 and
// nothing else for n <= 0. INVALID_ARGUMENT for a null device (or a null w
// with n > 0).
absl::StatusOr<double> AddRegularization(const float* w, int64_t n,
                                         const Regularizer& r,
                                         double gradient_scale, float* dw,
                                         Device* device);

// AddRegularization of L2(l2) with gradient_scale 1.
absl::StatusOr<double> AddL2Regularization(const float* w, int64_t n, float l2,
                                           float* dw, Device* device);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_L2_H_
