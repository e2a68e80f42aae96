#include "compute/cpu/merge.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Inputs long enough to be split across threads (compute/cpu/parallel.h
// shares elementwise work in chunks of 16 Ki), the last chunk short.
constexpr int64_t kN = 3 * 16 * 1024 + 7;

std::vector<float> Input(int seed) {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) {
    v[i] = static_cast<float>((i * (seed + 3) + seed * 7) % 23) - 11.0f;
  }
  return v;
}

float Apply(MergeOp op, float a, float b) {
  switch (op) {
    case MergeOp::kAdd:
      return a + b;
    case MergeOp::kSubtract:
      return a - b;
    case MergeOp::kMultiply:
      return a * b;
    case MergeOp::kAverage:
      return (a + b) / 2;
    case MergeOp::kMaximum:
      return std::max(a, b);
    case MergeOp::kMinimum:
      return std::min(a, b);
  }
  return 0;
}

// d op(a, b) / d a (which 0) or / d b (which 1); ties go to a.
float Grad(MergeOp op, float a, float b, int which) {
  switch (op) {
    case MergeOp::kAdd:
      return 1;
    case MergeOp::kSubtract:
      return which == 0 ? 1 : -1;
    case MergeOp::kMultiply:
      return which == 0 ? b : a;
    case MergeOp::kAverage:
      return 0.5f;
    case MergeOp::kMaximum:
      return (which == 0) == (a >= b) ? 1 : 0;
    case MergeOp::kMinimum:
      return (which == 0) == (a <= b) ? 1 : 0;
  }
  return 0;
}

TEST(Merge, EveryOpMatchesItsFormulaOnAnyThreadCount) {
  const std::vector<float> a = Input(1), b = Input(2), dy = Input(3);
  for (MergeOp op : {MergeOp::kAdd, MergeOp::kSubtract, MergeOp::kMultiply,
                     MergeOp::kAverage, MergeOp::kMaximum, MergeOp::kMinimum}) {
    for (int threads : {1, 2, 3}) {
      std::vector<float> y(kN, -99), da(kN, -99), db(kN, -99);
      MergeForward(op, {a.data(), b.data()}, kN, y.data(), threads);
      MergeBackward(op, {a.data(), b.data()}, dy.data(), kN, 0, da.data(),
                    threads);
      MergeBackward(op, {a.data(), b.data()}, dy.data(), kN, 1, db.data(),
                    threads);
      for (int64_t i = 0; i < kN; ++i) {
        ASSERT_EQ(y[i], Apply(op, a[i], b[i]))
            << "op " << static_cast<int>(op) << " threads " << threads << " i "
            << i;
        ASSERT_EQ(da[i], dy[i] * Grad(op, a[i], b[i], 0)) << i;
        ASSERT_EQ(db[i], dy[i] * Grad(op, a[i], b[i], 1)) << i;
      }
    }
  }
}

TEST(Merge, AddOfThreeInputs) {
  const std::vector<float> a = Input(1), b = Input(2), c = Input(4);
  std::vector<float> y(kN);
  MergeForward(MergeOp::kAdd, {a.data(), b.data(), c.data()}, kN, y.data(), 2);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(y[i], a[i] + b[i] + c[i]) << i;
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
