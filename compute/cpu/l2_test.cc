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

TEST(AddRegularization, PenaltyIsL1TimesSumOfMagnitudesPlusL2Term) {
  std::vector<float> w = {1.0f, -2.0f, 0.0f, 3.0f};
  Regularizer r;
  r.l1 = 0.1f;
  r.l2 = 0.01f;
  // 0.1 * 6 + 0.01 * 14.
  EXPECT_NEAR(AddRegularization(w.data(), 4, r, 1.0, nullptr), 0.74, 1e-7);
}

// gradient_scale * (l1 * sign(w) + 2 * l2 * w), sign(0) = 0.
TEST(AddRegularization, AddsScaledL1SignAndL2Gradient) {
  std::vector<float> w = {1.0f, -2.0f, 0.0f, 3.0f};
  std::vector<float> dw = {10.0f, 10.0f, 10.0f, 10.0f};
  Regularizer r;
  r.l1 = 0.25f;
  r.l2 = 0.5f;
  AddRegularization(w.data(), 4, r, /*gradient_scale=*/2.0, dw.data());
  EXPECT_EQ(dw, (std::vector<float>{12.5f, 5.5f, 10.0f, 16.5f}));
}

TEST(AddRegularization, L1L2GradientMatchesFiniteDifferences) {
  std::vector<float> w = RandomFloats(50, 2);
  std::vector<float> dw(50, 0.0f);
  Regularizer r;
  r.l1 = 3e-2f;
  r.l2 = 1e-2f;
  AddRegularization(w.data(), 50, r, 1.0, dw.data());
  auto loss = [&]() {
    return AddRegularization(w.data(), 50, r, 1.0, nullptr);
  };
  // Steps of 1e-4 cross |w|'s kink at 0 for no element of RandomFloats.
  EXPECT_TRUE(
      GradientsClose(dw, NumericGradient(loss, w.data(), 50, 1e-4), 1e-2));
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
