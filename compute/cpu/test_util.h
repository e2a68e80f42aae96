// Test helpers for the CPU ops: seeded random inputs and finite-difference
// gradient checks.
//
//   std::vector<float> x = RandomFloats(150, /*seed=*/1);
//   std::vector<double> numeric = NumericGradient(
//       [&] { return Loss(x); }, x.data(), x.size(), /*eps=*/1e-3);
//   EXPECT_TRUE(GradientsClose(analytic, numeric, /*tolerance=*/1e-2));
#ifndef PSTRAIN_COMPUTE_CPU_TEST_UTIL_H_
#define PSTRAIN_COMPUTE_CPU_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {

// n values uniform in [lo, hi), the same for the same seed.
std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f);

// sum_i a[i] * b[i] in double: a scalar loss L = <y, r> whose gradient with
// respect to y is r.
double Dot(const std::vector<float>& a, const std::vector<float>& b);

// d loss / d x[i] for each i by central differences: x[i] is set to
// x[i] +- eps (in float), loss() evaluated, and x[i] restored. The step is
// the float difference actually applied.
std::vector<double> NumericGradient(const std::function<double()>& loss,
                                    float* x, int64_t n, double eps);

// Success when max_i |analytic[i] - numeric[i]| <= tolerance * scale, where
// scale = max(max_i |numeric[i]|, 1e-3): an error relative to the gradient's
// largest component, so near-zero components do not need relative accuracy
// that float32 cannot give.
::testing::AssertionResult GradientsClose(const std::vector<float>& analytic,
                                          const std::vector<double>& numeric,
                                          double tolerance);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_TEST_UTIL_H_
