#include "compute/cpu/dropout.h"

#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

DropoutKey Key(uint64_t seed, uint64_t step, uint64_t offset = 0) {
  DropoutKey key;
  key.seed = seed;
  key.step = step;
  key.offset = offset;
  return key;
}

std::unique_ptr<DropoutOp> Make(int64_t n, float rate) {
  absl::StatusOr<std::unique_ptr<DropoutOp>> op = DropoutOp::Create(n, rate);
  EXPECT_TRUE(op.ok()) << op.status();
  return op.ok() ? std::move(*op) : nullptr;
}

double KeptFraction(const std::vector<uint8_t>& mask) {
  int64_t kept = 0;
  for (uint8_t m : mask) kept += m;
  return static_cast<double>(kept) / mask.size();
}

TEST(DropoutOp, KeepsOneMinusRateOfElements) {
  // 10^6 draws: the kept fraction's standard deviation is below 5e-4, so a
  // 3e-3 tolerance is more than 6 sigma.
  const int64_t n = 1000000;
  std::vector<float> x(n, 1.0f), y(n);
  for (float rate : {0.1f, 0.5f, 0.8f}) {
    SCOPED_TRACE(rate);
    std::unique_ptr<DropoutOp> dropout = Make(n, rate);
    ASSERT_TRUE(dropout->Forward(x.data(), Key(42, 7), y.data()).ok());
    EXPECT_NEAR(KeptFraction(dropout->mask()), 1.0 - rate, 3e-3);
  }
}

TEST(DropoutOp, ScalesKeptElementsAndZeroesDropped) {
  const int64_t n = 1000;
  std::unique_ptr<DropoutOp> dropout = Make(n, 0.25f);
  EXPECT_FLOAT_EQ(dropout->scale(), 1.0f / 0.75f);
  std::vector<float> x = RandomFloats(n, 1), y(n);
  ASSERT_TRUE(dropout->Forward(x.data(), Key(1, 2), y.data()).ok());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(y[i], dropout->mask()[i] ? x[i] * (1.0f / 0.75f) : 0.0f) << i;
  }
}

TEST(DropoutOp, SameKeyGivesSameMaskNewStepOrSeedADifferentOne) {
  const int64_t n = 4096;
  std::vector<float> x(n, 1.0f), y(n);
  std::unique_ptr<DropoutOp> a = Make(n, 0.5f);
  std::unique_ptr<DropoutOp> b = Make(n, 0.5f);
  ASSERT_TRUE(a->Forward(x.data(), Key(9, 100), y.data()).ok());
  ASSERT_TRUE(b->Forward(x.data(), Key(9, 100), y.data()).ok());
  EXPECT_EQ(a->mask(), b->mask());
  for (DropoutKey other : {Key(9, 101), Key(10, 100)}) {
    ASSERT_TRUE(b->Forward(x.data(), other, y.data()).ok());
    int64_t differing = 0;
    for (int64_t i = 0; i < n; ++i) differing += a->mask()[i] != b->mask()[i];
    // Independent masks at rate 0.5 differ in about half the elements.
    EXPECT_NEAR(static_cast<double>(differing) / n, 0.5, 0.05);
  }
}

TEST(DropoutOp, MaskDependsOnlyOnGlobalPositionNotOnSplit) {
  // One worker's 2n elements at offset 0 equal two workers' n elements at
  // offsets 0 and n (an odd n crosses Philox blocks of four).
  const int64_t n = 1001;
  std::vector<float> x(2 * n, 1.0f), y(2 * n);
  std::unique_ptr<DropoutOp> whole = Make(2 * n, 0.5f);
  std::unique_ptr<DropoutOp> half = Make(n, 0.5f);
  ASSERT_TRUE(whole->Forward(x.data(), Key(3, 4, 0), y.data()).ok());
  ASSERT_TRUE(half->Forward(x.data(), Key(3, 4, 0), y.data()).ok());
  std::vector<uint8_t> joined = half->mask();
  ASSERT_TRUE(half->Forward(x.data(), Key(3, 4, n), y.data()).ok());
  joined.insert(joined.end(), half->mask().begin(), half->mask().end());
  EXPECT_EQ(joined, whole->mask());
}

TEST(DropoutOp, RateZeroIsIdentity) {
  const int64_t n = 10000;
  std::unique_ptr<DropoutOp> dropout = Make(n, 0.0f);
  std::vector<float> x = RandomFloats(n, 5), y(n), dy = RandomFloats(n, 6),
                     dx(n);
  ASSERT_TRUE(dropout->Forward(x.data(), Key(1, 1), y.data()).ok());
  ASSERT_TRUE(dropout->Backward(dy.data(), dx.data()).ok());
  EXPECT_EQ(y, x);
  EXPECT_EQ(dx, dy);
}

// Central differences, eps 1e-3, with the mask held fixed (same key every
// evaluation); max |analytic - numeric| <= 1e-2 * max |numeric|.
TEST(DropoutOp, GradientMatchesFiniteDifferencesWithTheSameMask) {
  const int64_t n = 150;
  std::unique_ptr<DropoutOp> dropout = Make(n, 0.4f);
  std::vector<float> x = RandomFloats(n, 7), y(n), dx(n);
  std::vector<float> dy = RandomFloats(n, 8);
  ASSERT_TRUE(dropout->Forward(x.data(), Key(5, 6), y.data()).ok());
  ASSERT_TRUE(dropout->Backward(dy.data(), dx.data()).ok());
  auto loss = [&]() {
    EXPECT_TRUE(dropout->Forward(x.data(), Key(5, 6), y.data()).ok());
    return Dot(y, dy);
  };
  EXPECT_TRUE(
      GradientsClose(dx, NumericGradient(loss, x.data(), n, 1e-3), 1e-2));
}

TEST(DropoutOp, RejectsRateOutsideZeroToOne) {
  EXPECT_FALSE(DropoutOp::Create(10, 1.0f).ok());
  EXPECT_FALSE(DropoutOp::Create(10, -0.1f).ok());
  EXPECT_FALSE(DropoutOp::Create(0, 0.5f).ok());
}

TEST(DropoutOp, BackwardBeforeForwardFails) {
  std::unique_ptr<DropoutOp> dropout = Make(4, 0.5f);
  std::vector<float> dy(4), dx(4);
  EXPECT_EQ(dropout->Backward(dy.data(), dx.data()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(DropoutOp, NullBuffersAreInvalidArgumentNamingTheCall) {
  std::unique_ptr<DropoutOp> op = Make(4, 0.5f);
  std::vector<float> buffer(4);
  EXPECT_EQ(
      op->Forward(buffer.data(), DropoutKey(), nullptr),
      absl::InvalidArgumentError("Dropout forward: x and y are required"));
  EXPECT_EQ(
      op->Backward(nullptr, buffer.data()),
      absl::InvalidArgumentError("Dropout backward: dy and dx are required"));
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
