#include "compute/cpu/softmax.h"

#include <cmath>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Forward against the double reference within 1e-6 (probabilities <= 1).
// Gradient check: central differences, eps 1e-3, float32 forward;
// max |analytic - numeric| <= 1e-2 * max |numeric|.
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(SoftmaxOp, ForwardMatchesNaiveReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  const SoftmaxShape s{4, 10};
  absl::StatusOr<std::unique_ptr<SoftmaxOp>> softmax =
      SoftmaxOp::Create(s, engine.get());
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  std::vector<float> x = RandomFloats(40, 1, -5.0f, 5.0f), y(40);
  x[3] = 80.0f;  // Large logits must not overflow.
  ASSERT_TRUE((*softmax)->Forward(x.data(), y.data()).ok());
  for (int64_t n = 0; n < s.batch; ++n) {
    double max = x[n * 10];
    for (int64_t j = 0; j < 10; ++j) max = std::max<double>(max, x[n * 10 + j]);
    double sum = 0;
    for (int64_t j = 0; j < 10; ++j) sum += std::exp(x[n * 10 + j] - max);
    for (int64_t j = 0; j < 10; ++j) {
      EXPECT_NEAR(y[n * 10 + j], std::exp(x[n * 10 + j] - max) / sum, 1e-6);
    }
  }
}

TEST(SoftmaxOp, GradientMatchesFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  const SoftmaxShape s{2, 5};
  absl::StatusOr<std::unique_ptr<SoftmaxOp>> created =
      SoftmaxOp::Create(s, engine.get());
  ASSERT_TRUE(created.ok()) << created.status();
  SoftmaxOp& softmax = **created;
  std::vector<float> x = RandomFloats(10, 2, -2.0f, 2.0f), y(10), dx(10);
  std::vector<float> dy = RandomFloats(10, 3);
  ASSERT_TRUE(softmax.Forward(x.data(), y.data()).ok());
  ASSERT_TRUE(softmax.Backward(y.data(), dy.data(), dx.data()).ok());
  auto loss = [&]() {
    EXPECT_TRUE(softmax.Forward(x.data(), y.data()).ok());
    return Dot(y, dy);
  };
  EXPECT_TRUE(GradientsClose(dx, NumericGradient(loss, x.data(), 10, kEps),
                             kGradientTolerance));
}

TEST(SoftmaxOp, RejectsEmptyShape) {
  std::unique_ptr<Engine> engine = MakeEngine();
  EXPECT_EQ(SoftmaxOp::Create({0, 10}, engine.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SoftmaxOp, NullBuffersAreInvalidArgumentNamingTheCall) {
  std::unique_ptr<Engine> engine = MakeEngine();
  absl::StatusOr<std::unique_ptr<SoftmaxOp>> softmax =
      SoftmaxOp::Create({2, 3}, engine.get());
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  std::vector<float> buffer(6);
  EXPECT_EQ(
      (*softmax)->Forward(nullptr, buffer.data()),
      absl::InvalidArgumentError("Softmax forward: x and y are required"));
  EXPECT_EQ((*softmax)->Backward(buffer.data(), buffer.data(), nullptr),
            absl::InvalidArgumentError(
                "Softmax backward: y, dy and dx are required"));
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
