#include "worker/cpu/losses.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/cpu/test_util.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Gradient checks: central differences, eps 1e-3, float32 inputs (the losses
// compute in double); max |analytic - numeric| <= 1e-2 * max |numeric|.
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

// Rows of softmax(random logits): probabilities well inside the clip range.
std::vector<float> RandomProbabilities(int64_t batch, int64_t classes,
                                       uint32_t seed) {
  std::vector<float> p = RandomFloats(batch * classes, seed, -2.0f, 2.0f);
  for (int64_t n = 0; n < batch; ++n) {
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(p[n * classes + j]);
    for (int64_t j = 0; j < classes; ++j) {
      p[n * classes + j] =
          static_cast<float>(std::exp(p[n * classes + j]) / sum);
    }
  }
  return p;
}

TEST(SparseSoftmaxCrossEntropyFromLogits, EqualLogitsGiveLogClassesPerExample) {
  std::vector<float> logits(3 * 4, 0.5f), grad(12);
  std::vector<int32_t> labels = {0, 3, 1};
  absl::StatusOr<double> loss = SparseSoftmaxCrossEntropyFromLogits(
      logits.data(), labels.data(), 3, 4, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, 3 * std::log(4.0), 1e-9);  // A sum, not a mean.
  EXPECT_FLOAT_EQ(grad[0], 0.25f - 1.0f);
  EXPECT_FLOAT_EQ(grad[1], 0.25f);
}

TEST(SparseSoftmaxCrossEntropyFromLogits, StableForLargeLogits) {
  std::vector<float> logits = {1000.0f, 0.0f};
  std::vector<int32_t> labels = {1};
  absl::StatusOr<double> loss = SparseSoftmaxCrossEntropyFromLogits(
      logits.data(), labels.data(), 1, 2, nullptr);
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, 1000.0, 1e-9);
}

TEST(SparseSoftmaxCrossEntropyFromLogits, GradientMatchesFiniteDifferences) {
  const int64_t batch = 3, classes = 5;
  std::vector<float> logits = RandomFloats(batch * classes, 1, -3.0f, 3.0f);
  std::vector<int32_t> labels = {4, 0, 2};
  std::vector<float> grad(batch * classes);
  ASSERT_TRUE(SparseSoftmaxCrossEntropyFromLogits(logits.data(), labels.data(),
                                                  batch, classes, grad.data())
                  .ok());
  auto loss = [&]() {
    return *SparseSoftmaxCrossEntropyFromLogits(logits.data(), labels.data(),
                                                batch, classes, nullptr);
  };
  EXPECT_TRUE(GradientsClose(
      grad, NumericGradient(loss, logits.data(), logits.size(), kEps),
      kGradientTolerance));
}

TEST(SparseSoftmaxCrossEntropyFromLogits, RejectsLabelOutOfRange) {
  std::vector<float> logits(4);
  std::vector<int32_t> labels = {0, 2};
  EXPECT_EQ(SparseSoftmaxCrossEntropyFromLogits(logits.data(), labels.data(), 2,
                                                2, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SparseCrossEntropyFromProbabilities, IsMinusLogOfLabelsProbability) {
  std::vector<float> probs = {0.2f, 0.7f, 0.1f, 0.5f, 0.25f, 0.25f};
  std::vector<int32_t> labels = {1, 2};
  absl::StatusOr<double> loss = SparseCrossEntropyFromProbabilities(
      probs.data(), labels.data(), 2, 3, nullptr);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, -std::log(0.7) - std::log(0.25), 1e-6);
}

TEST(SparseCrossEntropyFromProbabilities, ClipsLikeKeras) {
  // p[label] = 0 is clipped to 1e-7; the row's clipped sum is then 1 + 1e-7
  // (Keras takes log(clip(p)) as logits, renormalizing).
  std::vector<float> probs = {1.0f, 0.0f};
  std::vector<int32_t> labels = {1};
  std::vector<float> grad(2);
  absl::StatusOr<double> loss = SparseCrossEntropyFromProbabilities(
      probs.data(), labels.data(), 1, 2, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  const double low = kKerasEpsilon, high = 1.0f - kKerasEpsilon;
  EXPECT_NEAR(*loss, std::log(low + high) - std::log(low), 1e-6);
  EXPECT_NEAR(*loss, 16.118, 1e-3);
  // Both entries were clipped: no gradient flows, as through tf.clip_by_value.
  EXPECT_EQ(grad, (std::vector<float>{0.0f, 0.0f}));
}

TEST(SparseCrossEntropyFromProbabilities, GradientMatchesFiniteDifferences) {
  const int64_t batch = 2, classes = 4;
  std::vector<float> probs = RandomProbabilities(batch, classes, 2);
  std::vector<int32_t> labels = {3, 1};
  std::vector<float> grad(batch * classes);
  ASSERT_TRUE(SparseCrossEntropyFromProbabilities(probs.data(), labels.data(),
                                                  batch, classes, grad.data())
                  .ok());
  // The probabilities are perturbed one at a time (rows no longer sum to 1),
  // which the renormalized Keras loss accounts for.
  auto loss = [&]() {
    return *SparseCrossEntropyFromProbabilities(probs.data(), labels.data(),
                                                batch, classes, nullptr);
  };
  EXPECT_TRUE(GradientsClose(
      grad, NumericGradient(loss, probs.data(), probs.size(), kEps),
      kGradientTolerance));
}

TEST(MeanSquaredErrorSum, IsSumOverExamplesOfMeanOverOutputs) {
  std::vector<float> y = {1.0f, 2.0f, 0.0f, 0.0f};
  std::vector<float> t = {0.0f, 0.0f, 3.0f, 1.0f};
  std::vector<float> grad(4);
  absl::StatusOr<double> loss =
      MeanSquaredErrorSum(y.data(), t.data(), 2, 2, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_DOUBLE_EQ(*loss, (1.0 + 4.0) / 2 + (9.0 + 1.0) / 2);
  EXPECT_EQ(grad, (std::vector<float>{1.0f, 2.0f, -3.0f, -1.0f}));
}

TEST(MeanSquaredErrorSum, GradientMatchesFiniteDifferences) {
  std::vector<float> y = RandomFloats(12, 3), t = RandomFloats(12, 4);
  std::vector<float> grad(12);
  ASSERT_TRUE(MeanSquaredErrorSum(y.data(), t.data(), 3, 4, grad.data()).ok());
  auto loss = [&]() {
    return *MeanSquaredErrorSum(y.data(), t.data(), 3, 4, nullptr);
  };
  EXPECT_TRUE(GradientsClose(grad, NumericGradient(loss, y.data(), 12, kEps),
                             kGradientTolerance));
}

TEST(CountCorrect, CountsRowsWhoseArgmaxIsTheLabel) {
  std::vector<float> scores = {0.1f,  0.9f,  0.0f,    // argmax 1
                               2.0f,  1.0f,  2.0f,    // tie: first, 0
                               -1.0f, -3.0f, -0.5f};  // argmax 2
  std::vector<int32_t> labels = {1, 2, 2};
  absl::StatusOr<int64_t> correct =
      CountCorrect(scores.data(), labels.data(), 3, 3);
  ASSERT_TRUE(correct.ok()) << correct.status();
  EXPECT_EQ(*correct, 2);
}

TEST(CountCorrect, RejectsNegativeLabel) {
  std::vector<float> scores(2);
  std::vector<int32_t> labels = {-1};
  EXPECT_EQ(CountCorrect(scores.data(), labels.data(), 1, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
