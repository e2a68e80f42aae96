// The call-argument checks of the ops with a kernel and an optional bias,
// Dense and Conv2D, that the CPU and the GPU ops (compute/cpu/dense.h,
// compute/cpu/conv2d.h, compute/gpu/dense.h, compute/gpu/conv2d.h) make
// alike, with the same messages naming the op:
//
//   PSTRAIN_RETURN_IF_ERROR(
//       CheckWeightedForward("Dense", x, w, b, y, shape_.use_bias));
//   PSTRAIN_RETURN_IF_ERROR(CheckWeightedBackward(
//       "Dense", x, w, dy, dx, dw, db, shape_.compute_dx, shape_.use_bias));
#ifndef PSTRAIN_COMPUTE_WEIGHTED_OP_CHECKS_H_
#define PSTRAIN_COMPUTE_WEIGHTED_OP_CHECKS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace worker {

// INVALID_ARGUMENT unless x, w and y are given, and b is iff use_bias.
absl::Status CheckWeightedForward(absl::string_view op, const float* x,
                                  const float* w, const float* b,
                                  const float* y, bool use_bias);

// INVALID_ARGUMENT unless x, dy and dw are given, dx (and then w) is iff
// compute_dx, and db is iff use_bias.
absl::Status CheckWeightedBackward(absl::string_view op, const float* x,
                                   const float* w, const float* dy,
                                   const float* dx, const float* dw,
                                   const float* db, bool compute_dx,
                                   bool use_bias);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_WEIGHTED_OP_CHECKS_H_
