#include "compute/cpu/pool2d.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Gradient checks: central differences of sum(dy * y), eps 1e-3; max
// |analytic - numeric| <= 1e-2 * max |numeric|. For the max pool the inputs
// are distinct and 0.01 apart, so no perturbation changes a maximum.
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
  s.width = 6;
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
  return {Shape(2, 2, Padding::kValid),
          Shape(2, 2, Padding::kSame),
          Shape(3, 2, Padding::kValid),
          Shape(3, 2, Padding::kSame),
          Shape(3, 1, Padding::kSame),
          Shape(4, 3, Padding::kSame),
          rect};
}

int64_t InSize(const Pool2DShape& s) {
  return s.batch * s.height * s.width * s.channels;
}

// Keras's output size and top/left padding, written out again here.
struct Dim {
  int64_t out, pad;
};
Dim RefDim(int64_t in, int64_t k, int64_t s, Padding padding) {
  if (padding == Padding::kValid) return {(in - k) / s + 1, 0};
  const int64_t out = (in + s - 1) / s;
  return {out, std::max<int64_t>((out - 1) * s + k - in, 0) / 2};
}

// For each output element, the flat indices of the inputs its window covers.
std::vector<std::vector<int64_t>> Windows(const Pool2DShape& s) {
  Dim dh = RefDim(s.height, s.pool_h, s.stride_h, s.padding);
  Dim dw = RefDim(s.width, s.pool_w, s.stride_w, s.padding);
  std::vector<std::vector<int64_t>> windows;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < dh.out; ++oh)
      for (int64_t ow = 0; ow < dw.out; ++ow)
        for (int64_t c = 0; c < s.channels; ++c) {
          std::vector<int64_t> window;
          for (int64_t kh = 0; kh < s.pool_h; ++kh)
            for (int64_t kw = 0; kw < s.pool_w; ++kw) {
              const int64_t ih = oh * s.stride_h + kh - dh.pad;
              const int64_t iw = ow * s.stride_w + kw - dw.pad;
              if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
              window.push_back(
                  ((n * s.height + ih) * s.width + iw) * s.channels + c);
            }
          windows.push_back(window);
        }
  return windows;
}

TEST(AvgPool2DOp, ForwardAndBackwardMatchNaiveReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const Pool2DShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message()
                 << "pool " << s.pool_h << "x" << s.pool_w << " stride "
                 << s.stride_h << "x" << s.stride_w << " same "
                 << (s.padding == Padding::kSame));
    absl::StatusOr<std::unique_ptr<AvgPool2DOp>> pool =
        AvgPool2DOp::Create(s, engine.get());
    ASSERT_TRUE(pool.ok()) << pool.status();
    std::vector<std::vector<int64_t>> windows = Windows(s);
    ASSERT_EQ(
        static_cast<int64_t>(windows.size()),
        s.batch * (*pool)->out_height() * (*pool)->out_width() * s.channels);
    std::vector<float> x = RandomFloats(InSize(s), 3);
    std::vector<float> dy = RandomFloats(windows.size(), 4);
    std::vector<float> y(windows.size()), dx(InSize(s));
    ASSERT_EQ((*pool)->Forward(x.data(), y.data()), absl::OkStatus());
    ASSERT_EQ((*pool)->Backward(dy.data(), dx.data()), absl::OkStatus());
    std::vector<double> expected_dx(InSize(s), 0.0);
    for (size_t o = 0; o < windows.size(); ++o) {
      double sum = 0;
      for (int64_t i : windows[o]) sum += x[i];
      // Only in-bounds elements count, padding excluded.
      EXPECT_NEAR(y[o], sum / windows[o].size(), 1e-6) << "output " << o;
      for (int64_t i : windows[o]) {
        expected_dx[i] += static_cast<double>(dy[o]) / windows[o].size();
      }
    }
    for (int64_t i = 0; i < InSize(s); ++i) {
      EXPECT_NEAR(dx[i], expected_dx[i], 1e-6) << "input " << i;
    }
  }
}

TEST(AvgPool2DOp, GradientMatchesFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const Pool2DShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message() << "pool " << s.pool_h << "x" << s.pool_w
                                    << " stride " << s.stride_h);
    absl::StatusOr<std::unique_ptr<AvgPool2DOp>> created =
        AvgPool2DOp::Create(s, engine.get());
    ASSERT_TRUE(created.ok()) << created.status();
    AvgPool2DOp& pool = **created;
    const int64_t out_size =
        s.batch * pool.out_height() * pool.out_width() * s.channels;
    std::vector<float> x = RandomFloats(InSize(s), 5);
    std::vector<float> y(out_size), dx(InSize(s));
    std::vector<float> dy = RandomFloats(out_size, 6);
    ASSERT_EQ(pool.Backward(dy.data(), dx.data()), absl::OkStatus());
    auto loss = [&]() {
      EXPECT_EQ(pool.Forward(x.data(), y.data()), absl::OkStatus());
      return Dot(y, dy);
    };
    EXPECT_TRUE(GradientsClose(dx,
                               NumericGradient(loss, x.data(), x.size(), kEps),
                               kGradientTolerance));
  }
}

TEST(AvgPool2DOp, CreateRefusesBadShapes) {
  std::unique_ptr<Engine> engine = MakeEngine();
  absl::Status status =
      AvgPool2DOp::Create(Shape(6, 1, Padding::kValid), engine.get()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "AvgPool2D height: valid padding: kernel 6 is larger than input 5");
  Pool2DShape s = Shape(2, 2, Padding::kSame);
  s.stride_w = 0;
  EXPECT_EQ(AvgPool2DOp::Create(s, engine.get()).status().message(),
            "AvgPool2D: stride_w must be positive, got 0");
  s = Shape(2, 2, Padding::kSame);
  s.channels = -3;
  EXPECT_EQ(AvgPool2DOp::Create(s, engine.get()).status().message(),
            "AvgPool2D: channels must be positive, got -3");
}

GlobalPoolShape Global(GlobalPoolMode mode) {
  return {/*batch=*/3, /*steps=*/7, /*channels=*/4, mode};
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

TEST(GlobalPoolOp, ForwardMatchesNaiveReference) {
  for (GlobalPoolMode mode : {GlobalPoolMode::kAverage, GlobalPoolMode::kMax}) {
    GlobalPoolShape s = Global(mode);
    absl::StatusOr<std::unique_ptr<GlobalPoolOp>> pool =
        GlobalPoolOp::Create(s);
    ASSERT_TRUE(pool.ok()) << pool.status();
    std::vector<float> x = RandomFloats(s.batch * s.steps * s.channels, 7);
    std::vector<float> y(s.batch * s.channels);
    ASSERT_EQ((*pool)->Forward(x.data(), y.data()), absl::OkStatus());
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t c = 0; c < s.channels; ++c) {
        double sum = 0, best = -INFINITY;
        for (int64_t t = 0; t < s.steps; ++t) {
          const float v = x[(b * s.steps + t) * s.channels + c];
          sum += v;
          best = std::max<double>(best, v);
        }
        const double expected =
            mode == GlobalPoolMode::kAverage ? sum / s.steps : best;
        EXPECT_NEAR(y[b * s.channels + c], expected, 1e-6);
      }
    }
  }
}

TEST(GlobalPoolOp, GradientMatchesFiniteDifferences) {
  for (GlobalPoolMode mode : {GlobalPoolMode::kAverage, GlobalPoolMode::kMax}) {
    GlobalPoolShape s = Global(mode);
    absl::StatusOr<std::unique_ptr<GlobalPoolOp>> created =
        GlobalPoolOp::Create(s);
    ASSERT_TRUE(created.ok()) << created.status();
    GlobalPoolOp& pool = **created;
    std::vector<float> x = DistinctValues(s.batch * s.steps * s.channels, 8);
    std::vector<float> y(s.batch * s.channels), dx(x.size());
    std::vector<float> dy = RandomFloats(y.size(), 9);
    ASSERT_EQ(pool.Forward(x.data(), y.data()), absl::OkStatus());
    ASSERT_EQ(pool.Backward(dy.data(), dx.data()), absl::OkStatus());
    auto loss = [&]() {
      EXPECT_EQ(pool.Forward(x.data(), y.data()), absl::OkStatus());
      return Dot(y, dy);
    };
    EXPECT_TRUE(GradientsClose(dx,
                               NumericGradient(loss, x.data(), x.size(), kEps),
                               kGradientTolerance));
  }
}

TEST(GlobalPoolOp, MaxGradientGoesToTheFirstMaximum) {
  GlobalPoolShape s = {/*batch=*/1, /*steps=*/4, /*channels=*/2,
                       GlobalPoolMode::kMax};
  absl::StatusOr<std::unique_ptr<GlobalPoolOp>> pool = GlobalPoolOp::Create(s);
  ASSERT_TRUE(pool.ok()) << pool.status();
  // Channel 0 peaks at steps 1 and 3, channel 1 at steps 0 and 2.
  std::vector<float> x = {0, 5, 2, 1, 1, 5, 2, 0};
  std::vector<float> y(2), dy = {10, 20}, dx(8);
  ASSERT_EQ((*pool)->Forward(x.data(), y.data()), absl::OkStatus());
  EXPECT_EQ(y, (std::vector<float>{2, 5}));
  ASSERT_EQ((*pool)->Backward(dy.data(), dx.data()), absl::OkStatus());
  EXPECT_EQ(dx, (std::vector<float>{0, 20, 10, 0, 0, 0, 0, 0}));
}

TEST(GlobalPoolOp, MaxBackwardBeforeForwardFails) {
  GlobalPoolShape s = Global(GlobalPoolMode::kMax);
  absl::StatusOr<std::unique_ptr<GlobalPoolOp>> pool = GlobalPoolOp::Create(s);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<float> dy(s.batch * s.channels),
      dx(s.batch * s.steps * s.channels);
  EXPECT_EQ((*pool)->Backward(dy.data(), dx.data()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GlobalPoolOp, CreateRefusesBadShapes) {
  GlobalPoolShape s = Global(GlobalPoolMode::kAverage);
  s.steps = 0;
  absl::Status status = GlobalPoolOp::Create(s).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "GlobalPool: steps must be positive, got 0");
  s = Global(GlobalPoolMode::kMax);
  s.batch = -1;
  EXPECT_EQ(GlobalPoolOp::Create(s).status().message(),
            "GlobalPool: batch must be positive, got -1");
}

TEST(AvgPool2DOp, BackwardNeedsNoForwardAndNullBuffersAreRefused) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Pool2DShape s;  // One 2x2 window over a 2x2 input.
  s.batch = 1;
  s.height = 2;
  s.width = 2;
  s.channels = 1;
  absl::StatusOr<std::unique_ptr<AvgPool2DOp>> pool =
      AvgPool2DOp::Create(s, engine.get());
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<float> dy = {2.0f}, dx(4);
  ASSERT_EQ((*pool)->Backward(dy.data(), dx.data()), absl::OkStatus());
  EXPECT_EQ(dx, (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(
      (*pool)->Forward(dx.data(), nullptr),
      absl::InvalidArgumentError("AvgPool2D forward: x and y are required"));
  EXPECT_EQ(
      (*pool)->Backward(nullptr, dx.data()),
      absl::InvalidArgumentError("AvgPool2D backward: dy and dx are required"));
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
