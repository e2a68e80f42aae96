#include "compute/cpu/l2.h"

namespace pstrain {
namespace worker {
namespace cpu {

double AddL2Regularization(const float* w, int64_t n, float l2, float* dw) {
  double sum_squares = 0;
  const float twice_l2 = 2.0f * l2;
  for (int64_t i = 0; i < n; ++i) {
    sum_squares += static_cast<double>(w[i]) * w[i];
    if (dw != nullptr) dw[i] += twice_l2 * w[i];
  }
  return l2 * sum_squares;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
