#include "chief/evaluation.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/tensor.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/loss_config.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace chief {
namespace {

TEST(ExactAuc, HandComputedCases) {
  // Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 pairs.
  EXPECT_DOUBLE_EQ(ExactAuc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(ExactAuc({0.9f, 0.8f, 0.2f, 0.1f}, {1, 1, 0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(ExactAuc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
}

TEST(ExactAuc, TiesCountOneHalf) {
  // Every score equal: every pair a tie.
  EXPECT_DOUBLE_EQ(ExactAuc({0.5f, 0.5f, 0.5f, 0.5f}, {0, 1, 0, 1}), 0.5);
  // The positive 2 beats the negative 1 and ties the negative 2; the
  // positive 3 beats both: (1 + 0.5 + 2) / 4. The trapezoid under the ROC
  // points (0, 0), (0, 0.5), (0.5, 1), (1, 1) gives the same.
  EXPECT_DOUBLE_EQ(ExactAuc({1, 2, 2, 3}, {0, 1, 0, 1}), 0.875);
  // Two positives and a negative tied at the top, one of each below:
  // positives {5, 5, 1}, negatives {5, 0}: (0.5 + 1) * 2 + (0 + 1) = 4 of 6.
  EXPECT_DOUBLE_EQ(ExactAuc({5, 5, 5, 1, 0}, {1, 1, 0, 1, 0}), 4.0 / 6.0);
}

TEST(ExactAuc, UndefinedWithoutBothClassesOrWithNaN) {
  EXPECT_TRUE(std::isnan(ExactAuc({0.1f, 0.7f}, {1, 1})));
  EXPECT_TRUE(std::isnan(ExactAuc({0.1f, 0.7f}, {0, 0})));
  EXPECT_TRUE(std::isnan(ExactAuc({0.1f, NAN}, {0, 1})));
}

TEST(ExactAuc, EqualsTheFractionOfPairsOrderedRight) {
  // Scores on a coarse grid, so that many tie; against a count of all pairs.
  std::mt19937 random(3);
  std::uniform_int_distribution<int> grid(0, 9), coin(0, 1);
  std::vector<float> scores;
  std::vector<int32_t> labels;
  for (int i = 0; i < 300; ++i) {
    labels.push_back(coin(random));
    scores.push_back(grid(random) / 10.0f + 0.3f * labels.back());
  }
  double wins = 0, pairs = 0;
  for (size_t p = 0; p < scores.size(); ++p) {
    for (size_t n = 0; n < scores.size(); ++n) {
      if (labels[p] != 1 || labels[n] != 0) continue;
      pairs += 1;
      wins += scores[p] > scores[n] ? 1.0 : scores[p] == scores[n] ? 0.5 : 0;
    }
  }
  EXPECT_NEAR(ExactAuc(scores, labels), wins / pairs, 1e-12);
}

// One sigmoid unit on two features: logit = x0 (kernel [1, 0], bias 0).
constexpr char kSigmoidModel[] =
    R"({"class_name": "Sequential", "config": {"name": "b", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in",
        "batch_input_shape": [null, 2]}},
      {"class_name": "Dense", "config": {"name": "out", "units": 1,
        "activation": "sigmoid"}}]}})";

TEST(EvaluateOnTestSet, BinaryMetricsOverTheWholeSet) {
  absl::StatusOr<worker::ModelSpec> spec =
      worker::ParseKerasModel(kSigmoidModel, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  LossConfig loss;
  loss.set_kind(LossConfig::BINARY_CROSSENTROPY);
  const worker::BackendLoss b = worker::ToBackendLoss(loss);
  worker::CpuBackendOptions options;
  options.num_threads = 1;
  options.loss = b.kind;
  options.loss_input = b.input;
  absl::StatusOr<std::unique_ptr<worker::Backend>> backend =
      worker::CreateCpuBackend(*spec, options);
  ASSERT_TRUE(backend.ok()) << backend.status();

  // Logits x0 = {-2, 1, 0.5, 3, -1} for labels {0, 0, 1, 1, 1}.
  const std::vector<float> x0 = {-2.0f, 1.0f, 0.5f, 3.0f, -1.0f};
  data::Dataset test;
  test.labels = {0, 0, 1, 1, 1};
  test.num_classes = 2;
  test.features = *Tensor::Create(DT_FLOAT, {5, 2});
  for (int i = 0; i < 5; ++i) {
    test.features.data<float>()[2 * i] = x0[i];
    test.features.data<float>()[2 * i + 1] = 7.0f;  // Weighted 0.
  }
  Tensor kernel = *Tensor::Create(DT_FLOAT, {2, 1});
  Tensor bias = *Tensor::Create(DT_FLOAT, {1});
  kernel.data<float>()[0] = 1.0f;
  kernel.data<float>()[1] = 0.0f;
  bias.data<float>()[0] = 0.0f;
  const worker::Weights weights = {{"out/kernel", &kernel},
                                   {"out/bias", &bias}};
  // Batches of 2: the AUC is over all five examples, not per batch.
  absl::StatusOr<Evaluation> eval =
      EvaluateOnTestSet(backend->get(), test, weights, /*version=*/1,
                        /*batch=*/2, /*binary_metrics=*/true);
  ASSERT_TRUE(eval.ok()) << eval.status();
  double loss_sum = 0;
  for (int i = 0; i < 5; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(x0[i])));
    loss_sum -= test.labels[i] == 1 ? std::log(p) : std::log(1 - p);
  }
  EXPECT_NEAR(eval->loss, loss_sum / 5, 1e-6);
  // p > 0.5 for x0 > 0: right for -2 (0), 0.5 (1), 3 (1).
  EXPECT_DOUBLE_EQ(eval->accuracy, 3.0 / 5.0);
  // Positives {0.5, 3, -1} against negatives {-2, 1}: 4 of 6 pairs.
  ASSERT_TRUE(eval->auc.has_value());
  EXPECT_DOUBLE_EQ(*eval->auc, 4.0 / 6.0);
  // Log loss: the binary cross-entropy of the sigmoid's probabilities,
  // computed above; calibration: their mean over the positive rate 3/5.
  double p_sum = 0;
  for (int i = 0; i < 5; ++i) {
    p_sum += 1.0 / (1.0 + std::exp(-static_cast<double>(x0[i])));
  }
  ASSERT_TRUE(eval->log_loss.has_value());
  EXPECT_NEAR(*eval->log_loss, loss_sum / 5, 1e-6);
  EXPECT_NEAR(eval->mean_prediction, p_sum / 5, 1e-6);
  EXPECT_DOUBLE_EQ(eval->positive_rate, 0.6);
  ASSERT_TRUE(eval->calibration.has_value());
  EXPECT_NEAR(*eval->calibration, (p_sum / 5) / 0.6, 1e-6);
  EXPECT_EQ(FormatEvaluation(*eval),
            absl::StrFormat("test_loss %.4f  test_acc 0.6000  test_auc 0.6667"
                            "  test_logloss %.4f  test_calibration %.3f",
                            loss_sum / 5, *eval->log_loss, *eval->calibration));

  // Without binary metrics: no AUC, and the line as before.
  eval = EvaluateOnTestSet(backend->get(), test, weights, 1, 2);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_FALSE(eval->auc.has_value());
  EXPECT_EQ(FormatEvaluation(*eval),
            absl::StrFormat("test_loss %.4f  test_acc 0.6000", loss_sum / 5));
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
