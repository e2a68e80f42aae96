#include "compute/cpu/relu.h"

#include <cmath>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Gradient check: central differences, eps 1e-3, on inputs at least 0.05
// away from the kink at 0; max |analytic - numeric| <= 1e-2 * max |numeric|.
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

std::vector<float> AwayFromZero(int64_t n, uint32_t seed) {
  std::vector<float> x = RandomFloats(n, seed);
  for (float& v : x) v += std::copysign(0.05f, v);
  return x;
}

TEST(ReluOp, ForwardIsMaxWithZero) {
  std::unique_ptr<Engine> engine = MakeEngine();
  absl::StatusOr<std::unique_ptr<ReluOp>> relu =
      ReluOp::Create(5, engine.get());
  ASSERT_TRUE(relu.ok()) << relu.status();
  std::vector<float> x = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f};
  std::vector<float> y(5);
  ASSERT_TRUE((*relu)->Forward(x.data(), y.data()).ok());
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 0.0f, 0.5f, 3.0f}));
}

TEST(ReluOp, GradientMatchesFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  const int64_t n = 2 * 5 * 5 * 3;
  absl::StatusOr<std::unique_ptr<ReluOp>> created =
      ReluOp::Create(n, engine.get());
  ASSERT_TRUE(created.ok()) << created.status();
  ReluOp& relu = **created;
  std::vector<float> x = AwayFromZero(n, 1), y(n), dx(n);
  std::vector<float> dy = RandomFloats(n, 2);
  ASSERT_TRUE(relu.Forward(x.data(), y.data()).ok());
  ASSERT_TRUE(relu.Backward(y.data(), dy.data(), dx.data()).ok());
  auto loss = [&]() {
    EXPECT_TRUE(relu.Forward(x.data(), y.data()).ok());
    return Dot(y, dy);
  };
  EXPECT_TRUE(GradientsClose(dx, NumericGradient(loss, x.data(), n, kEps),
                             kGradientTolerance));
}

TEST(ReluOp, WorksInPlace) {
  std::unique_ptr<Engine> engine = MakeEngine();
  const int64_t n = 1000;
  absl::StatusOr<std::unique_ptr<ReluOp>> relu =
      ReluOp::Create(n, engine.get());
  ASSERT_TRUE(relu.ok()) << relu.status();
  std::vector<float> x = AwayFromZero(n, 3);
  std::vector<float> y = x;
  ASSERT_TRUE((*relu)->Forward(y.data(), y.data()).ok());
  std::vector<float> g = RandomFloats(n, 4);
  std::vector<float> expected(n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f);
    expected[i] = x[i] > 0 ? g[i] : 0.0f;
  }
  ASSERT_TRUE((*relu)->Backward(y.data(), g.data(), g.data()).ok());
  EXPECT_EQ(g, expected);
}

TEST(ReluOp, RejectsEmptySize) {
  std::unique_ptr<Engine> engine = MakeEngine();
  EXPECT_EQ(ReluOp::Create(0, engine.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReluOp, NullBuffersAreInvalidArgumentNamingTheCall) {
  std::unique_ptr<Engine> engine = MakeEngine();
  absl::StatusOr<std::unique_ptr<ReluOp>> relu =
      ReluOp::Create(3, engine.get());
  ASSERT_TRUE(relu.ok()) << relu.status();
  std::vector<float> buffer(3);
  EXPECT_EQ((*relu)->Forward(buffer.data(), nullptr),
            absl::InvalidArgumentError("ReLU forward: x and y are required"));
  EXPECT_EQ(
      (*relu)->Backward(buffer.data(), nullptr, buffer.data()),
      absl::InvalidArgumentError("ReLU backward: y, dy and dx are required"));
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
