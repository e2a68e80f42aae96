#include "compute/cpu/l2.h"

#include <cmath>

namespace pstrain {
namespace worker {
namespace cpu {

double AddRegularization(const float* w, int64_t n, const Regularizer& r,
                         double gradient_scale, float* dw) {
  double sum_abs = 0;
  double sum_squares = 0;
  const float l1_step = static_cast<float>(gradient_scale * r.l1);
  const float l2_step = static_cast<float>(gradient_scale * 2.0 * r.l2);
  for (int64_t i = 0; i < n; ++i) {
    const float v = w[i];
    sum_abs += std::fabs(static_cast<double>(v));
    sum_squares += static_cast<double>(v) * v;
    if (dw != nullptr) {
      const float sign = v > 0 ? 1.0f : (v < 0 ? -1.0f : 0.0f);
      dw[i] += l1_step * sign + l2_step * v;
    }
  }
  return double{r.l1} * sum_abs + double{r.l2} * sum_squares;
}

double AddL2Regularization(const float* w, int64_t n, float l2, float* dw) {
  Regularizer r;
  r.l2 = l2;
  return AddRegularization(w, n, r, /*gradient_scale=*/1.0, dw);
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
