// Runs on any machine: the GPU loss kernels' per-example arithmetic
// (loss_math.h), compiled for the host, against compute/cpu/losses.h, which
// it must reproduce. loss_kernels.cu runs these same functions, one row per
// thread, and the host adds the rows' results in order.
#include "compute/gpu/loss_math.h"

#include <cstdint>
#include <random>
#include <vector>

#include "compute/cpu/losses.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr float kLow = cpu::kKerasEpsilon;
constexpr float kHigh = 1.0f - cpu::kKerasEpsilon;

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 generator(seed);
  std::vector<float> values(n);
  for (float& v : values) {
    v = static_cast<float>(lo + (hi - lo) * (generator() / 4294967296.0));
  }
  return values;
}

std::vector<int32_t> RandomLabels(int64_t n, int64_t classes, uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<int32_t> labels(n);
  for (int32_t& label : labels) label = generator() % classes;
  return labels;
}

// Soft targets (rows of non-negative weights, some exactly 0) and one-hot
// rows.
std::vector<float> Targets(int64_t batch, int64_t classes, uint32_t seed) {
  std::vector<float> targets = RandomFloats(batch * classes, seed, -0.5f, 1);
  for (float& t : targets) t = t < 0 ? 0.0f : t;
  const std::vector<int32_t> labels = RandomLabels(batch, classes, seed + 1);
  for (int64_t i = 0; i < batch; i += 2) {  // Every other row one-hot.
    for (int64_t j = 0; j < classes; ++j) {
      targets[i * classes + j] = j == labels[i] ? 1.0f : 0.0f;
    }
  }
  return targets;
}

TEST(LossMath, CategoricalCrossEntropyFromLogitsEqualsTheCpuLoss) {
  const int64_t batch = 13, classes = 7;
  const std::vector<float> logits = RandomFloats(batch * classes, 1, -8, 8);
  const std::vector<float> targets = Targets(batch, classes, 2);
  std::vector<float> cpu_grad(batch * classes), grad(batch * classes);
  absl::StatusOr<double> cpu_loss = cpu::SoftmaxCrossEntropyFromLogits(
      logits.data(), targets.data(), batch, classes, cpu_grad.data());
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  double loss = 0;
  for (int64_t i = 0; i < batch; ++i) {
    loss += CategoricalCrossEntropyFromLogitsRow(
        logits.data() + i * classes, targets.data() + i * classes, classes,
        grad.data() + i * classes);
  }
  // Each row's terms summed first, then the rows: the CPU adds every term
  // into one running total.
  EXPECT_NEAR(loss, *cpu_loss, 1e-12 * *cpu_loss);
  EXPECT_EQ(grad, cpu_grad);
}

TEST(LossMath, CategoricalCrossEntropyFromProbabilitiesEqualsTheCpuLoss) {
  const int64_t batch = 11, classes = 5;
  std::vector<float> probs = RandomFloats(batch * classes, 3, 0, 1);
  // Values outside and on Keras's clip range, with non-zero targets there.
  probs[0] = 0.0f;
  probs[6] = 1e-9f;
  probs[12] = kLow;
  std::vector<float> targets = Targets(batch, classes, 4);
  targets[0] = targets[6] = targets[12] = 1.0f;
  std::vector<float> cpu_grad(batch * classes), grad(batch * classes);
  absl::StatusOr<double> cpu_loss =
      cpu::CategoricalCrossEntropyFromProbabilities(
          probs.data(), targets.data(), batch, classes, cpu_grad.data());
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  double loss = 0;
  for (int64_t i = 0; i < batch; ++i) {
    loss += CategoricalCrossEntropyFromProbabilitiesRow(
        probs.data() + i * classes, targets.data() + i * classes, classes, kLow,
        kHigh, grad.data() + i * classes);
  }
  EXPECT_NEAR(loss, *cpu_loss, 1e-12 * *cpu_loss);  // Summed per row first.
  EXPECT_EQ(grad, cpu_grad);
}

TEST(LossMath, SigmoidCrossEntropyEqualsTheCpuLoss) {
  const int64_t batch = 20;
  std::vector<float> logits = RandomFloats(batch, 5, -30, 30);
  logits[0] = 0.0f;
  const std::vector<int32_t> labels = RandomLabels(batch, 2, 6);
  std::vector<float> cpu_grad(batch), grad(batch);
  absl::StatusOr<double> cpu_loss = cpu::SigmoidCrossEntropyFromLogits(
      logits.data(), labels.data(), batch, cpu_grad.data());
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  double loss = 0;
  for (int64_t i = 0; i < batch; ++i) {
    loss += SigmoidCrossEntropyRow(logits[i], labels[i], &grad[i]);
  }
  EXPECT_EQ(loss, *cpu_loss);
  EXPECT_EQ(grad, cpu_grad);
}

TEST(LossMath, BinaryCrossEntropyFromProbabilitiesEqualsTheCpuLoss) {
  const int64_t batch = 12;
  std::vector<float> probs = RandomFloats(batch, 7, 0, 1);
  probs[0] = 0.0f;  // Clipped, both labels.
  probs[1] = 0.0f;
  probs[2] = 1.0f;
  probs[3] = 1.0f;
  probs[4] = kLow;  // On the bounds: the gradient passes.
  probs[5] = kHigh;
  std::vector<int32_t> labels = RandomLabels(batch, 2, 8);
  labels[0] = labels[2] = labels[4] = 0;
  labels[1] = labels[3] = labels[5] = 1;
  std::vector<float> cpu_grad(batch), grad(batch);
  absl::StatusOr<double> cpu_loss = cpu::BinaryCrossEntropyFromProbabilities(
      probs.data(), labels.data(), batch, cpu_grad.data());
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  double loss = 0;
  for (int64_t i = 0; i < batch; ++i) {
    loss += BinaryCrossEntropyFromProbabilityRow(probs[i], labels[i], kLow,
                                                 kHigh, &grad[i]);
  }
  EXPECT_EQ(loss, *cpu_loss);
  EXPECT_EQ(grad, cpu_grad);
  EXPECT_EQ(grad[0], 0.0f);
  EXPECT_NE(grad[4], 0.0f);
}

TEST(LossMath, AbsoluteErrorAndHuberEqualTheCpuLosses) {
  const int64_t batch = 6, outputs = 9;
  const std::vector<float> predictions =
      RandomFloats(batch * outputs, 9, -3, 3);
  std::vector<float> targets = RandomFloats(batch * outputs, 10, -3, 3);
  targets[4] = predictions[4];  // Equal: sign 0.
  const float delta = 1.0f;
  std::vector<float> cpu_grad(batch * outputs), grad(batch * outputs);
  absl::StatusOr<double> cpu_mae = cpu::MeanAbsoluteErrorSum(
      predictions.data(), targets.data(), batch, outputs, cpu_grad.data());
  ASSERT_TRUE(cpu_mae.ok()) << cpu_mae.status();
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    total += AbsoluteErrorRow(predictions.data() + i * outputs,
                              targets.data() + i * outputs, outputs,
                              grad.data() + i * outputs);
  }
  // Summed per row, then over rows: the CPU adds all elements in one run.
  EXPECT_NEAR(total / outputs, *cpu_mae, 1e-12 * *cpu_mae);
  EXPECT_EQ(grad, cpu_grad);
  EXPECT_EQ(grad[4], 0.0f);

  absl::StatusOr<double> cpu_huber =
      cpu::HuberSum(predictions.data(), targets.data(), batch, outputs, delta,
                    cpu_grad.data());
  ASSERT_TRUE(cpu_huber.ok()) << cpu_huber.status();
  total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    total +=
        HuberRow(predictions.data() + i * outputs, targets.data() + i * outputs,
                 outputs, delta, grad.data() + i * outputs);
  }
  EXPECT_NEAR(total / outputs, *cpu_huber, 1e-12 * *cpu_huber);
  EXPECT_EQ(grad, cpu_grad);
}

TEST(LossMath, BinaryCorrectEqualsTheCpuCount) {
  // Scores on both sides of, and exactly at, each threshold.
  const std::vector<float> scores = {-1.0f, 0.0f, 0.3f, 0.5f, 0.7f, 2.0f};
  const std::vector<int32_t> labels = {0, 1, 0, 1, 1, 1};
  for (const bool logits : {true, false}) {
    SCOPED_TRACE(logits ? "logits" : "probabilities");
    absl::StatusOr<int64_t> cpu_correct = cpu::CountBinaryCorrect(
        scores.data(), logits, labels.data(), scores.size());
    ASSERT_TRUE(cpu_correct.ok()) << cpu_correct.status();
    double correct = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
      correct += BinaryCorrectRow(scores[i], logits ? 0.0f : 0.5f, labels[i]);
    }
    EXPECT_EQ(correct, *cpu_correct);
  }
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
