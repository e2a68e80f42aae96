#include "compute/cpu/test_util.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "compute/cpu/bf16_support.h"

namespace pstrain {
namespace worker {
namespace cpu {

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 generator(seed);
  std::vector<float> values(n);
  for (float& v : values) {
    // mt19937's output is fixed by the standard; the distributions are not.
    const double u = generator() / 4294967296.0;
    v = static_cast<float>(lo + (hi - lo) * u);
  }
  return values;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    sum += static_cast<double>(a[i]) * b[i];
  }
  return sum;
}

std::vector<double> NumericGradient(const std::function<double()>& loss,
                                    float* x, int64_t n, double eps) {
  std::vector<double> gradient(n);
  for (int64_t i = 0; i < n; ++i) {
    const float original = x[i];
    const float plus = static_cast<float>(original + eps);
    const float minus = static_cast<float>(original - eps);
    x[i] = plus;
    const double loss_plus = loss();
    x[i] = minus;
    const double loss_minus = loss();
    x[i] = original;
    gradient[i] = (loss_plus - loss_minus) /
                  (static_cast<double>(plus) - static_cast<double>(minus));
  }
  return gradient;
}

::testing::AssertionResult GradientsClose(const std::vector<float>& analytic,
                                          const std::vector<double>& numeric,
                                          double tolerance) {
  if (analytic.size() != numeric.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << analytic.size() << " vs " << numeric.size();
  }
  double scale = 1e-3;
  for (double g : numeric) scale = std::max(scale, std::abs(g));
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    const double error = std::abs(analytic[i] - numeric[i]);
    if (!(error <= worst)) {  // Also catches NaN.
      worst = std::isnan(error) ? INFINITY : error;
      worst_index = i;
    }
  }
  if (worst <= tolerance * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_index << ": analytic " << analytic[worst_index]
         << " vs numeric " << numeric[worst_index] << ", error " << worst
         << " > " << tolerance << " * scale " << scale;
}

double MaxRelativeDifference(const std::vector<float>& got,
                             const std::vector<float>& want) {
  double scale = 1e-3, worst = 0;
  for (const float v : want) scale = std::max(scale, std::fabs(double{v}));
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
  }
  if (got.size() != want.size()) return 1e30;
  return worst / scale;
}

std::string Bf16Unavailable() {
  const absl::Status status = CheckCpuBf16Support();
  return status.ok() ? "" : std::string(status.message());
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
