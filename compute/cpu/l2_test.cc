#include "compute/cpu/l2.h"

#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

TEST(AddL2Regularization, PenaltyIsL2TimesSumOfSquares) {
  std::vector<float> w = {1.0f, -2.0f, 3.0f};
  EXPECT_NEAR(AddL2Regularization(w.data(), 3, 0.01f, nullptr), 0.14, 1e-7);
}

TEST(AddL2Regularization, AddsTwiceL2TimesWeightsToGradient) {
  std::vector<float> w = {1.0f, -2.0f, 3.0f};
  std::vector<float> dw = {10.0f, 10.0f, 10.0f};
  AddL2Regularization(w.data(), 3, 0.5f, dw.data());
  EXPECT_EQ(dw, (std::vector<float>{11.0f, 8.0f, 13.0f}));
}

// Central differences, eps 1e-3; max |analytic - numeric| <= 1e-2 * max
// |numeric|.
TEST(AddL2Regularization, GradientMatchesFiniteDifferences) {
  std::vector<float> w = RandomFloats(50, 1);
  std::vector<float> dw(50, 0.0f);
  AddL2Regularization(w.data(), 50, 1e-2f, dw.data());
  auto loss = [&]() {
    return AddL2Regularization(w.data(), 50, 1e-2f, nullptr);
  };
  EXPECT_TRUE(
      GradientsClose(dw, NumericGradient(loss, w.data(), 50, 1e-3), 1e-2));
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
