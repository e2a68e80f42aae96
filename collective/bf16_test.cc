#include "collective/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace pstrain {
namespace collective {
namespace {

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

TEST(Bf16, RepresentableValuesRoundTripExactly) {
  for (float value : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f, 1e-30f}) {
    float rounded = RoundToBf16(RoundToBf16(value));
    EXPECT_EQ(RoundToBf16(rounded), rounded);
  }
  EXPECT_EQ(RoundToBf16(1.0f), 1.0f);
  EXPECT_EQ(RoundToBf16(-2.5f), -2.5f);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
}

TEST(Bf16, RoundsToNearestAndTiesToEven) {
  // 1 + 2^-7 is the bfloat16 after 1; 1 + 2^-8 lies halfway: ties to the
  // even one, 1.
  EXPECT_EQ(RoundToBf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // Halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(RoundToBf16(1.0f + 3 * std::ldexp(1.0f, -8)),
            1.0f + std::ldexp(1.0f, -6));
  // Just above halfway: up; just below: down.
  EXPECT_EQ(RoundToBf16(FromBits(0x3f808001u)), FromBits(0x3f810000u));
  EXPECT_EQ(RoundToBf16(FromBits(0x3f807fffu)), 1.0f);
}

TEST(Bf16, RelativeErrorIsAtMostTwoToTheMinusEight) {
  for (float value = 1e-3f; value < 1e6f; value *= 1.0137f) {
    float rounded = RoundToBf16(value);
    EXPECT_LE(std::fabs(rounded - value), std::ldexp(value, -8)) << value;
  }
}

TEST(Bf16, KeepsInfinitiesAndNaNsAndOverflowsToInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(RoundToBf16(inf), inf);
  EXPECT_EQ(RoundToBf16(-inf), -inf);
  EXPECT_TRUE(std::isnan(RoundToBf16(std::nanf(""))));
  // A NaN whose payload lives only in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(RoundToBf16(FromBits(0x7f800001u))));
  EXPECT_EQ(RoundToBf16(std::numeric_limits<float>::max()), inf);
}

}  // namespace
}  // namespace collective
}  // namespace pstrain
