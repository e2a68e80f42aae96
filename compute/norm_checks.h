// The argument rules that Keras's two normalization layers share, on every
// device: BatchNormalization (batch_norm_base.h) and LayerNormalization
// (layer_norm_base.h) both take an epsilon, an optional gamma (scale) and
// beta (center), and a Backward with the same buffers. The CPU and GPU ops
// reach these through their base classes; each returns INVALID_ARGUMENT
// naming the op, or OK.
//
//   PSTRAIN_RETURN_IF_ERROR(CheckNormEpsilon("LayerNorm", shape.epsilon));
//   PSTRAIN_RETURN_IF_ERROR(CheckNormParams("LayerNorm forward", gamma, beta,
//                                           shape.scale, shape.center));
#ifndef PSTRAIN_COMPUTE_NORM_CHECKS_H_
#define PSTRAIN_COMPUTE_NORM_CHECKS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace worker {

// Unless epsilon is finite and non-negative.
absl::Status CheckNormEpsilon(absl::string_view op, float epsilon);

// Unless gamma is given iff `scale` and beta iff `center`; `what` names the
// call ("BatchNorm forward (training)").
absl::Status CheckNormParams(absl::string_view what, const float* gamma,
                             const float* beta, bool scale, bool center);

// Backward's buffers: x and dy are required, gamma and dgamma given iff
// `scale`, dbeta iff `center` (dx may be null: not computed).
absl::Status CheckNormBackward(absl::string_view op, const float* x,
                               const float* gamma, const float* dy,
                               const float* dgamma, const float* dbeta,
                               bool scale, bool center);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_NORM_CHECKS_H_
