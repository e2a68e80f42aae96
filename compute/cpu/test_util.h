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
#include <cstdio>
#include <functional>
#include <string>
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

// max_i |got[i] - want[i]| / max(max_i |want[i]|, 1e-3): how far a bf16
// result is from its float32 twin, relative to the result's scale.
double MaxRelativeDifference(const std::vector<float>& got,
                             const std::vector<float>& want);

// Why this CPU cannot run bf16 ops (bf16_support.h), or "" when it can.
std::string Bf16Unavailable();

// In a TEST: skips, printing "SKIPPED: <reason>", where bf16 is unavailable.
#define PSTRAIN_SKIP_WITHOUT_BF16()                                       \
  do {                                                                    \
    const std::string reason = ::pstrain::worker::cpu::Bf16Unavailable(); \
    if (!reason.empty()) {                                                \
      std::printf("SKIPPED: %s\n", reason.c_str());                       \
      GTEST_SKIP() << reason;                                             \
    }                                                                     \
  } while (false)

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_TEST_UTIL_H_
