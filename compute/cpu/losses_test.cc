#include "compute/cpu/losses.h"

#include <cmath>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

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

// One-hot rows of `labels`, [labels.size(), classes].
std::vector<float> OneHot(const std::vector<int32_t>& labels, int64_t classes) {
  std::vector<float> rows(labels.size() * classes, 0.0f);
  for (size_t i = 0; i < labels.size(); ++i) {
    rows[i * classes + labels[i]] = 1.0f;
  }
  return rows;
}

// Keras's clip bounds, as the float32 values Keras clips to.
constexpr double kLow = kKerasEpsilon;
constexpr double kHigh = 1.0f - kKerasEpsilon;

TEST(SoftmaxCrossEntropyFromLogits, MatchesReferenceAndSparseOnOneHotRows) {
  const int64_t batch = 3, classes = 4;
  const std::vector<float> logits = RandomFloats(batch * classes, 5, -3, 3);
  const std::vector<int32_t> labels = {2, 0, 3};
  const std::vector<float> targets = OneHot(labels, classes);
  std::vector<float> grad(batch * classes), sparse_grad(batch * classes);
  absl::StatusOr<double> loss = SoftmaxCrossEntropyFromLogits(
      logits.data(), targets.data(), batch, classes, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  // Direct reference: -log(exp(z_y) / sum_j exp(z_j)), in double.
  double reference = 0;
  for (int64_t i = 0; i < batch; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) {
      sum += std::exp(static_cast<double>(logits[i * classes + j]));
    }
    reference -= std::log(
        std::exp(static_cast<double>(logits[i * classes + labels[i]])) / sum);
  }
  EXPECT_NEAR(*loss, reference, 1e-9);
  absl::StatusOr<double> sparse = SparseSoftmaxCrossEntropyFromLogits(
      logits.data(), labels.data(), batch, classes, sparse_grad.data());
  ASSERT_TRUE(sparse.ok());
  EXPECT_NEAR(*loss, *sparse, 1e-12);
  for (size_t k = 0; k < grad.size(); ++k) {
    EXPECT_NEAR(grad[k], sparse_grad[k], 1e-7) << k;
  }
}

TEST(SoftmaxCrossEntropyFromLogits, GradientMatchesFiniteDifferences) {
  const int64_t batch = 2, classes = 5;
  std::vector<float> logits = RandomFloats(batch * classes, 6, -3, 3);
  // Soft targets too: the gradient is softmax * sum(t) - t.
  const std::vector<float> targets = RandomFloats(batch * classes, 7, 0, 1);
  std::vector<float> grad(batch * classes);
  ASSERT_TRUE(SoftmaxCrossEntropyFromLogits(logits.data(), targets.data(),
                                            batch, classes, grad.data())
                  .ok());
  auto loss = [&]() {
    return *SoftmaxCrossEntropyFromLogits(logits.data(), targets.data(), batch,
                                          classes, nullptr);
  };
  EXPECT_TRUE(GradientsClose(
      grad, NumericGradient(loss, logits.data(), logits.size(), kEps),
      kGradientTolerance));
}

TEST(CategoricalCrossEntropyFromProbabilities, MatchesKerasDocExample) {
  // keras.ops.categorical_crossentropy's example: [0.10536 0.11653 0.06188].
  const std::vector<float> probs = {.9f,  .05f, .05f, .05f, .89f,
                                    .06f, .05f, .01f, .94f};
  const std::vector<float> targets = OneHot({0, 1, 2}, 3);
  absl::StatusOr<double> loss = CategoricalCrossEntropyFromProbabilities(
      probs.data(), targets.data(), 3, 3, nullptr);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, 0.10536 + 0.11653 + 0.06188, 3e-5);
}

TEST(CategoricalCrossEntropyFromProbabilities, NormalizesThenClipsLikeKeras) {
  // Row 0 sums to 2: q = p / 2, so -log(0.6 / 2). Row 1's label has p = 0:
  // q = 0 is clipped to eps, -log(eps), and no gradient flows in that row.
  const std::vector<float> probs = {0.6f, 1.4f, 1.0f, 0.0f};
  const std::vector<float> targets = OneHot({0, 1}, 2);
  std::vector<float> grad(4);
  absl::StatusOr<double> loss = CategoricalCrossEntropyFromProbabilities(
      probs.data(), targets.data(), 2, 2, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, -std::log(0.3) - std::log(kLow), 1e-6);
  EXPECT_NEAR(grad[0], 1.0 / 2.0 - 1.0 / 0.6, 1e-6);
  EXPECT_NEAR(grad[1], 1.0 / 2.0, 1e-6);
  EXPECT_EQ(grad[2], 0.0f);
  EXPECT_EQ(grad[3], 0.0f);
}

TEST(CategoricalCrossEntropyFromProbabilities,
     GradientMatchesFiniteDifferences) {
  const int64_t batch = 3, classes = 4;
  // Positive, unnormalized rows: the loss normalizes them.
  std::vector<float> probs = RandomFloats(batch * classes, 8, 0.05f, 1.0f);
  const std::vector<float> targets = OneHot({3, 0, 1}, classes);
  std::vector<float> grad(batch * classes);
  ASSERT_TRUE(CategoricalCrossEntropyFromProbabilities(
                  probs.data(), targets.data(), batch, classes, grad.data())
                  .ok());
  auto loss = [&]() {
    return *CategoricalCrossEntropyFromProbabilities(
        probs.data(), targets.data(), batch, classes, nullptr);
  };
  EXPECT_TRUE(GradientsClose(
      grad, NumericGradient(loss, probs.data(), probs.size(), kEps),
      kGradientTolerance));
}

TEST(SigmoidCrossEntropyFromLogits, MatchesReferenceAndIsStable) {
  const std::vector<float> logits = {-2.0f, 0.5f, 3.0f, 0.0f};
  const std::vector<int32_t> labels = {0, 1, 0, 1};
  std::vector<float> grad(4);
  absl::StatusOr<double> loss = SigmoidCrossEntropyFromLogits(
      logits.data(), labels.data(), 4, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  double reference = 0;
  for (int i = 0; i < 4; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])));
    reference -= labels[i] == 1 ? std::log(p) : std::log(1.0 - p);
    EXPECT_NEAR(grad[i], p - labels[i], 1e-7) << i;
  }
  EXPECT_NEAR(*loss, reference, 1e-9);
  // Far past where sigmoid(z) rounds to 0 or 1: the loss is |z|, not inf.
  const std::vector<float> far = {100.0f, -100.0f};
  const std::vector<int32_t> wrong = {0, 1};
  absl::StatusOr<double> far_loss =
      SigmoidCrossEntropyFromLogits(far.data(), wrong.data(), 2, nullptr);
  ASSERT_TRUE(far_loss.ok());
  EXPECT_NEAR(*far_loss, 200.0, 1e-9);
}

TEST(SigmoidCrossEntropyFromLogits, GradientMatchesFiniteDifferences) {
  std::vector<float> logits = RandomFloats(6, 9, -4, 4);
  const std::vector<int32_t> labels = {0, 1, 1, 0, 1, 0};
  std::vector<float> grad(6);
  ASSERT_TRUE(SigmoidCrossEntropyFromLogits(logits.data(), labels.data(), 6,
                                            grad.data())
                  .ok());
  auto loss = [&]() {
    return *SigmoidCrossEntropyFromLogits(logits.data(), labels.data(), 6,
                                          nullptr);
  };
  EXPECT_TRUE(GradientsClose(
      grad, NumericGradient(loss, logits.data(), 6, kEps), kGradientTolerance));
}

TEST(SigmoidCrossEntropyFromLogits, RefusesLabelsOtherThanZeroAndOne) {
  const std::vector<float> logits(3);
  const std::vector<int32_t> labels = {0, 1, 2};
  const absl::Status status =
      SigmoidCrossEntropyFromLogits(logits.data(), labels.data(), 3, nullptr)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(
                "label 2 of example 2 is not 0 or 1 (binary cross-entropy "
                "takes labels 0 and 1)"),
            absl::string_view::npos)
      << status;
}

TEST(BinaryCrossEntropyFromProbabilities, MatchesKerasDocExample) {
  // keras.ops.binary_crossentropy's example:
  // [0.10536054 0.10536054 0.22314355 0.22314355].
  const std::vector<float> probs = {0.1f, 0.9f, 0.8f, 0.2f};
  const std::vector<int32_t> labels = {0, 1, 1, 0};
  absl::StatusOr<double> loss = BinaryCrossEntropyFromProbabilities(
      probs.data(), labels.data(), 4, nullptr);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, 2 * 0.10536054 + 2 * 0.22314355, 1e-6);
}

TEST(BinaryCrossEntropyFromProbabilities, ClipsLikeKeras) {
  // p = 0 for label 1 is clipped to eps; p = 1 for label 0 to 1 - eps (in
  // float32, 1 - 1.19e-7): finite losses, and no gradient through the clip.
  const std::vector<float> probs = {0.0f, 1.0f, 0.25f};
  const std::vector<int32_t> labels = {1, 0, 0};
  std::vector<float> grad(3);
  absl::StatusOr<double> loss = BinaryCrossEntropyFromProbabilities(
      probs.data(), labels.data(), 3, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, -std::log(kLow) - std::log(1.0 - kHigh) - std::log(0.75),
              1e-6);
  EXPECT_NEAR(*loss, 16.118 + 15.942 + 0.288, 1e-3);
  EXPECT_EQ(grad[0], 0.0f);
  EXPECT_EQ(grad[1], 0.0f);
  EXPECT_NEAR(grad[2], 1.0 / 0.75, 1e-6);
}

TEST(BinaryCrossEntropyFromProbabilities, GradientMatchesFiniteDifferences) {
  std::vector<float> probs = RandomFloats(6, 10, 0.05f, 0.95f);
  const std::vector<int32_t> labels = {1, 0, 0, 1, 1, 0};
  std::vector<float> grad(6);
  ASSERT_TRUE(BinaryCrossEntropyFromProbabilities(probs.data(), labels.data(),
                                                  6, grad.data())
                  .ok());
  auto loss = [&]() {
    return *BinaryCrossEntropyFromProbabilities(probs.data(), labels.data(), 6,
                                                nullptr);
  };
  EXPECT_TRUE(GradientsClose(grad, NumericGradient(loss, probs.data(), 6, kEps),
                             kGradientTolerance));
}

TEST(MeanAbsoluteErrorSum, IsSumOverExamplesOfMeanOverOutputs) {
  const std::vector<float> y = {1.0f, 2.0f, 0.0f, 0.0f};
  const std::vector<float> t = {0.0f, 2.0f, 3.0f, -1.0f};
  std::vector<float> grad(4);
  absl::StatusOr<double> loss =
      MeanAbsoluteErrorSum(y.data(), t.data(), 2, 2, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_DOUBLE_EQ(*loss, (1.0 + 0.0) / 2 + (3.0 + 1.0) / 2);
  // sign / outputs, and 0 where the error is 0 (tf.abs's gradient).
  EXPECT_EQ(grad, (std::vector<float>{0.5f, 0.0f, -0.5f, 0.5f}));
}

TEST(MeanAbsoluteErrorSum, GradientMatchesFiniteDifferences) {
  std::vector<float> y = RandomFloats(12, 11), t = RandomFloats(12, 12);
  std::vector<float> grad(12);
  ASSERT_TRUE(MeanAbsoluteErrorSum(y.data(), t.data(), 3, 4, grad.data()).ok());
  auto loss = [&]() {
    return *MeanAbsoluteErrorSum(y.data(), t.data(), 3, 4, nullptr);
  };
  EXPECT_TRUE(GradientsClose(grad, NumericGradient(loss, y.data(), 12, kEps),
                             kGradientTolerance));
}

TEST(HuberSum, QuadraticWithinDeltaLinearBeyond) {
  // Errors 0.5 and -3 (delta 1): 0.5 * 0.25 and 1 * 3 - 0.5; then 1 and 0.
  const std::vector<float> y = {0.5f, -3.0f, 2.0f, 4.0f};
  const std::vector<float> t = {0.0f, 0.0f, 1.0f, 4.0f};
  std::vector<float> grad(4);
  absl::StatusOr<double> loss =
      HuberSum(y.data(), t.data(), 2, 2, kHuberDelta, grad.data());
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_DOUBLE_EQ(*loss, (0.125 + 2.5) / 2 + (0.5 + 0.0) / 2);
  EXPECT_EQ(grad, (std::vector<float>{0.25f, -0.5f, 0.5f, 0.0f}));
}

TEST(HuberSum, GradientMatchesFiniteDifferences) {
  // Errors in (-3, 3): both sides of delta.
  std::vector<float> y = RandomFloats(12, 13, -2, 2), t = RandomFloats(12, 14);
  std::vector<float> grad(12);
  ASSERT_TRUE(
      HuberSum(y.data(), t.data(), 3, 4, kHuberDelta, grad.data()).ok());
  auto loss = [&]() {
    return *HuberSum(y.data(), t.data(), 3, 4, kHuberDelta, nullptr);
  };
  EXPECT_TRUE(GradientsClose(grad, NumericGradient(loss, y.data(), 12, kEps),
                             kGradientTolerance));
}

TEST(CountBinaryCorrect, ThresholdsTheProbabilityAtOneHalf) {
  const std::vector<int32_t> labels = {1, 0, 1, 0};
  // Probabilities: 0.5 itself is class 0 (Keras: y_pred > threshold).
  const std::vector<float> probs = {0.7f, 0.5f, 0.5f, 0.2f};
  absl::StatusOr<int64_t> correct =
      CountBinaryCorrect(probs.data(), /*logits=*/false, labels.data(), 4);
  ASSERT_TRUE(correct.ok()) << correct.status();
  EXPECT_EQ(*correct, 3);
  // Logits: probability > 0.5 exactly when the logit is > 0.
  const std::vector<float> logits = {0.1f, 0.0f, -0.1f, -5.0f};
  correct =
      CountBinaryCorrect(logits.data(), /*logits=*/true, labels.data(), 4);
  ASSERT_TRUE(correct.ok()) << correct.status();
  EXPECT_EQ(*correct, 3);
}

TEST(LabelLoss, ComputesEachKindAgainstTheLabels) {
  const std::vector<float> output = {0.2f, 0.7f, 0.1f, 0.5f, 0.25f, 0.25f};
  const std::vector<int32_t> labels = {1, 2};
  const std::vector<float> one_hot = OneHot(labels, 3);
  struct Case {
    LossKind kind;
    bool logits;
    double expected;
  };
  const Case cases[] = {
      {LossKind::kSparseCrossEntropy, true,
       *SparseSoftmaxCrossEntropyFromLogits(output.data(), labels.data(), 2, 3,
                                            nullptr)},
      {LossKind::kSparseCrossEntropy, false, -std::log(0.7) - std::log(0.25)},
      {LossKind::kCategoricalCrossEntropy, true,
       *SoftmaxCrossEntropyFromLogits(output.data(), one_hot.data(), 2, 3,
                                      nullptr)},
      {LossKind::kCategoricalCrossEntropy, false,
       -std::log(0.7) - std::log(0.25)},
      {LossKind::kMeanSquaredError, false,
       (0.04 + 0.09 + 0.01) / 3 + (0.25 + 0.0625 + 0.5625) / 3},
      {LossKind::kMeanAbsoluteError, false,
       (0.2 + 0.3 + 0.1) / 3 + (0.5 + 0.25 + 0.75) / 3},
      {LossKind::kHuber, false,
       (0.02 + 0.045 + 0.005) / 3 + (0.125 + 0.03125 + 0.28125) / 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(LossKindName(c.kind));
    LabelLoss loss(c.kind, c.logits, 3);
    std::vector<float> grad(6);
    absl::StatusOr<LabelLoss::Result> r =
        loss.Compute(output.data(), labels.data(), 2, grad.data(), nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(r->loss_sum, c.expected, 1e-6);
    EXPECT_EQ(r->correct, 1);  // Row 0's argmax is 1; row 1's is 0, not 2.
  }
}

TEST(LabelLoss, BinaryTakesOneUnitAndLabelsZeroOrOne) {
  const std::vector<float> logits = {1.5f, -0.5f, 0.25f};
  const std::vector<int32_t> labels = {1, 1, 0};
  LabelLoss loss(LossKind::kBinaryCrossEntropy, /*output_is_logits=*/true, 1);
  std::vector<float> scores(3);
  absl::StatusOr<LabelLoss::Result> r =
      loss.Compute(logits.data(), labels.data(), 3, nullptr, scores.data());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(
      r->loss_sum,
      *SigmoidCrossEntropyFromLogits(logits.data(), labels.data(), 3, nullptr),
      1e-12);
  EXPECT_EQ(r->correct, 1);  // Only example 0 is on the right side of 0.
  EXPECT_EQ(scores, logits);
  const std::vector<int32_t> bad = {0, 3, 1};
  const absl::Status status =
      loss.Compute(logits.data(), bad.data(), 3, nullptr, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("label 3 of example 1 is not 0 or 1"),
            absl::string_view::npos)
      << status;
  // Several units: refused, naming the loss.
  LabelLoss wide(LossKind::kBinaryCrossEntropy, true, 2);
  const std::vector<float> two(6);
  EXPECT_NE(wide.Compute(two.data(), labels.data(), 3, nullptr, nullptr)
                .status()
                .message()
                .find("binary_crossentropy takes one output unit"),
            absl::string_view::npos);
}

TEST(LabelLoss, RegressionOnOneUnitTargetsTheLabelItself) {
  const std::vector<float> output = {2.25f, 0.0f};
  const std::vector<int32_t> labels = {2, 1};
  LabelLoss loss(LossKind::kMeanSquaredError, false, 1);
  absl::StatusOr<LabelLoss::Result> r =
      loss.Compute(output.data(), labels.data(), 2, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->loss_sum, 0.0625 + 1.0);
  EXPECT_EQ(r->correct, 1);  // 2.25 rounds to 2; 0 is not 1.
  // Several units: the label picks a one-hot row, and must be one of them.
  LabelLoss wide(LossKind::kHuber, false, 3);
  const std::vector<float> three(6);
  const absl::Status status =
      wide.Compute(three.data(), labels.data(), 2, nullptr, nullptr).status();
  EXPECT_TRUE(status.ok()) << status;
  const std::vector<int32_t> outside = {0, 3};
  EXPECT_NE(wide.Compute(three.data(), outside.data(), 2, nullptr, nullptr)
                .status()
                .message()
                .find("huber: label 3 of example 1 is outside [0, 3)"),
            absl::string_view::npos);
  // Scores need one unit.
  std::vector<float> scores(2);
  EXPECT_EQ(wide.Compute(three.data(), labels.data(), 2, nullptr, scores.data())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
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
