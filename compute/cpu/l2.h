// Keras's L2 weight regularizer, tf.keras.regularizers.L2(l2): a penalty of
// l2 * sum(square(w)) added to the loss, whose gradient 2 * l2 * w is added
// to the weights' gradient.
//
//   double penalty = AddL2Regularization(w, w_size, 1e-4f, dw);
//   loss += penalty;
//
// The penalty belongs once to each step's loss. In pstrain's convention
// (losses.h: per-example sums that the caller divides by the global batch)
// the penalty is not divided by the batch; when several workers push
// gradients that the ps adds, each adds 1 / num_workers of it, as Keras's
// distribution strategies scale regularization losses by 1 / replicas.
#ifndef PSTRAIN_COMPUTE_CPU_L2_H_
#define PSTRAIN_COMPUTE_CPU_L2_H_

#include <cstdint>

namespace pstrain {
namespace worker {
namespace cpu {

// Returns l2 * sum_i w[i]^2 (accumulated in double) and, when dw is not
// null, adds 2 * l2 * w[i] to dw[i]. Nothing for n <= 0.
double AddL2Regularization(const float* w, int64_t n, float l2, float* dw);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_L2_H_
