// Keras's weight regularizers L1, L2 and L1L2 (tf.keras.regularizers): a
// penalty of l1 * sum(|w|) + l2 * sum(square(w)) added to the loss, whose
// gradient l1 * sign(w) + 2 * l2 * w (sign(0) = 0, as tf.sign) is added to
// the weights' gradient.
//
//   Regularizer r;  r.l1 = 1e-5f;  r.l2 = 1e-4f;
//   double penalty = AddRegularization(w, w_size, r, /*gradient_scale=*/1, dw);
//   loss += penalty;
//
// The penalty belongs once to each step's loss. In pstrain's convention
// (losses.h: per-example sums that the caller divides by the global batch)
// the penalty is not divided by the batch, so a backend adds its gradient
// batch times (gradient_scale); when several workers push gradients that
// the ps adds, each adds 1 / num_workers of it, as Keras's distribution
// strategies scale regularization losses by 1 / replicas.
#ifndef PSTRAIN_COMPUTE_CPU_L2_H_
#define PSTRAIN_COMPUTE_CPU_L2_H_

#include <cstdint>

#include "model/model_spec.h"

namespace pstrain {
namespace worker {
namespace cpu {

// Returns l1 * sum_i |w[i]| + l2 * sum_i w[i]^2 (accumulated in double)
// and, when dw is not null, adds gradient_scale * (l1 * sign(w[i]) + 2 * l2
// * w[i]) to dw[i]. Nothing for n <= 0.
double AddRegularization(const float* w, int64_t n, const Regularizer& r,
                         double gradient_scale, float* dw);

// AddRegularization of L2(l2) with gradient_scale 1.
double AddL2Regularization(const float* w, int64_t n, float l2, float* dw);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_L2_H_
