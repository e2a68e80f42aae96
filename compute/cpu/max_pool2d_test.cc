#include "compute/cpu/max_pool2d.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Gradient checks: central differences, eps 1e-3, on inputs whose values
// are all distinct and at least 0.01 apart, so no perturbation changes which
// element is a window's maximum; max |analytic - numeric| <= 1e-2 * max
// |numeric|.
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

Pool2DShape Shape(int64_t pool, int64_t stride, Padding padding) {
  Pool2DShape s;
  s.batch = 2;
  s.height = 5;
  s.width = 5;
  s.channels = 3;
  s.pool_h = s.pool_w = pool;
  s.stride_h = s.stride_w = stride;
  s.padding = padding;
  return s;
}

std::vector<Pool2DShape> Shapes() {
  Pool2DShape rect = Shape(2, 2, Padding::kSame);
  rect.pool_w = 3;
  rect.stride_w = 1;
  return {Shape(2, 2, Padding::kValid), Shape(2, 2, Padding::kSame),
          Shape(3, 2, Padding::kValid), Shape(3, 1, Padding::kSame), rect};
}

// Distinct values k * 0.01 in random order.
std::vector<float> DistinctValues(int64_t n, uint32_t seed) {
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = 0.01f * (i - n / 2);
  std::mt19937 generator(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(values[i], values[generator() % (i + 1)]);
  }
  return values;
}

struct Dim {
  int64_t out, pad;
};
Dim RefDim(int64_t in, int64_t k, int64_t s, Padding padding) {
  if (padding == Padding::kValid) return {(in - k) / s + 1, 0};
  const int64_t out = (in + s - 1) / s;
  return {out, std::max<int64_t>((out - 1) * s + k - in, 0) / 2};
}

// Naive max pooling over the in-bounds part of each window.
std::vector<float> RefForward(const Pool2DShape& s,
                              const std::vector<float>& x) {
  Dim dh = RefDim(s.height, s.pool_h, s.stride_h, s.padding);
  Dim dw = RefDim(s.width, s.pool_w, s.stride_w, s.padding);
  std::vector<float> y;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < dh.out; ++oh)
      for (int64_t ow = 0; ow < dw.out; ++ow)
        for (int64_t c = 0; c < s.channels; ++c) {
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t kh = 0; kh < s.pool_h; ++kh)
            for (int64_t kw = 0; kw < s.pool_w; ++kw) {
              const int64_t ih = oh * s.stride_h + kh - dh.pad;
              const int64_t iw = ow * s.stride_w + kw - dw.pad;
              if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
              best = std::max(
                  best,
                  x[((n * s.height + ih) * s.width + iw) * s.channels + c]);
            }
          y.push_back(best);
        }
  return y;
}

int64_t InSize(const Pool2DShape& s) {
  return s.batch * s.height * s.width * s.channels;
}

TEST(MaxPool2DOp, ForwardMatchesNaiveReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const Pool2DShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message()
                 << "pool " << s.pool_h << "x" << s.pool_w << " stride "
                 << s.stride_h << "x" << s.stride_w << " same "
                 << (s.padding == Padding::kSame));
    absl::StatusOr<std::unique_ptr<MaxPool2DOp>> pool =
        MaxPool2DOp::Create(s, engine.get());
    ASSERT_TRUE(pool.ok()) << pool.status();
    // Negative values too: padding must never win in "same" mode.
    std::vector<float> x = RandomFloats(InSize(s), 3, -2.0f, -1.0f);
    std::vector<float> expected = RefForward(s, x);
    ASSERT_EQ(
        static_cast<int64_t>(expected.size()),
        s.batch * (*pool)->out_height() * (*pool)->out_width() * s.channels);
    std::vector<float> y(expected.size());
    ASSERT_TRUE((*pool)->Forward(x.data(), y.data()).ok());
    EXPECT_EQ(y, expected);
  }
}

TEST(MaxPool2DOp, GradientMatchesFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const Pool2DShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message() << "pool " << s.pool_h << "x" << s.pool_w
                                    << " stride " << s.stride_h);
    absl::StatusOr<std::unique_ptr<MaxPool2DOp>> created =
        MaxPool2DOp::Create(s, engine.get());
    ASSERT_TRUE(created.ok()) << created.status();
    MaxPool2DOp& pool = **created;
    const int64_t out_size =
        s.batch * pool.out_height() * pool.out_width() * s.channels;
    std::vector<float> x = DistinctValues(InSize(s), 5);
    std::vector<float> y(out_size), dx(InSize(s));
    std::vector<float> dy = RandomFloats(out_size, 6);
    ASSERT_TRUE(pool.Forward(x.data(), y.data()).ok());
    ASSERT_TRUE(pool.Backward(dy.data(), dx.data()).ok());
    auto loss = [&]() {
      EXPECT_TRUE(pool.Forward(x.data(), y.data()).ok());
      return Dot(y, dy);
    };
    EXPECT_TRUE(GradientsClose(dx,
                               NumericGradient(loss, x.data(), x.size(), kEps),
                               kGradientTolerance));
  }
}

TEST(MaxPool2DOp, ForwardTwiceGivesIdenticalResults) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Pool2DShape s = Shape(2, 2, Padding::kSame);
  absl::StatusOr<std::unique_ptr<MaxPool2DOp>> pool =
      MaxPool2DOp::Create(s, engine.get());
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<float> x = RandomFloats(InSize(s), 9);
  const size_t out_size = s.batch * 3 * 3 * s.channels;
  std::vector<float> first(out_size), second(out_size);
  ASSERT_TRUE((*pool)->Forward(x.data(), first.data()).ok());
  ASSERT_TRUE((*pool)->Forward(x.data(), second.data()).ok());
  EXPECT_EQ(first, second);
}

TEST(MaxPool2DOp, BackwardBeforeForwardFails) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Pool2DShape s = Shape(2, 2, Padding::kValid);
  absl::StatusOr<std::unique_ptr<MaxPool2DOp>> pool =
      MaxPool2DOp::Create(s, engine.get());
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<float> dy(s.batch * 2 * 2 * s.channels), dx(InSize(s));
  EXPECT_EQ((*pool)->Backward(dy.data(), dx.data()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MaxPool2DOp, RejectsPoolLargerThanValidInput) {
  std::unique_ptr<Engine> engine = MakeEngine();
  EXPECT_EQ(MaxPool2DOp::Create(Shape(6, 1, Padding::kValid), engine.get())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
