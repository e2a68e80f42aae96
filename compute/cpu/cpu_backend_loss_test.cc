// The CPU backend with every loss and from_logits setting: gradients of the
// whole model against finite differences, a final softmax or sigmoid read
// behind as Keras does, and a few steps of plain SGD lowering each loss.
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/losses.h"
#include "compute/cpu/model_test_util.h"
#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;
constexpr int64_t kBatch = 6;
constexpr int64_t kFeatures = 5;

// Dense(4, tanh), then Dense(units, activation).
ModelSpec Model(int units, const std::string& activation) {
  return MustParse(KerasModel(
      "5", {KerasLayer("Dense", R"("name": "hidden", "units": 4,
                        "activation": "tanh")"),
            KerasLayer("Dense", absl::StrCat(R"("name": "out", "units": )",
                                             units, R"(, "activation": ")",
                                             activation, R"(")"))}));
}

std::unique_ptr<Backend> MakeBackend(const ModelSpec& spec, LossKind loss,
                                     LossInput input) {
  CpuBackendOptions options;
  options.num_threads = 1;
  options.loss = loss;
  options.loss_input = input;
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      CreateCpuBackend(spec, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

struct Case {
  const char* name;
  int units;
  const char* activation;
  LossKind loss;
  LossInput input;
};

const Case kCases[] = {
    {"binary, sigmoid read behind", 1, "sigmoid", LossKind::kBinaryCrossEntropy,
     LossInput::kProbabilities},
    {"binary from logits", 1, "linear", LossKind::kBinaryCrossEntropy,
     LossInput::kLogits},
    {"binary with from_logits on a sigmoid: read behind too", 1, "sigmoid",
     LossKind::kBinaryCrossEntropy, LossInput::kLogits},
    {"binary, clipped hard_sigmoid output", 1, "hard_sigmoid",
     LossKind::kBinaryCrossEntropy, LossInput::kProbabilities},
    {"categorical, softmax read behind", 3, "softmax",
     LossKind::kCategoricalCrossEntropy, LossInput::kProbabilities},
    {"categorical from logits on a linear output", 3, "linear",
     LossKind::kCategoricalCrossEntropy, LossInput::kLogits},
    {"categorical, clipped hard_sigmoid outputs", 3, "hard_sigmoid",
     LossKind::kCategoricalCrossEntropy, LossInput::kProbabilities},
    {"sparse, clipped hard_sigmoid outputs", 3, "hard_sigmoid",
     LossKind::kSparseCrossEntropy, LossInput::kProbabilities},
    {"sparse on sigmoid outputs: read behind", 3, "sigmoid",
     LossKind::kSparseCrossEntropy, LossInput::kProbabilities},
    {"mae on a softmax", 3, "softmax", LossKind::kMeanAbsoluteError,
     LossInput::kProbabilities},
    {"huber", 3, "linear", LossKind::kHuber, LossInput::kProbabilities},
    {"mse on one unit", 1, "linear", LossKind::kMeanSquaredError,
     LossInput::kProbabilities},
};

std::vector<int32_t> Labels(int units) {
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < kBatch; ++i) {
    labels.push_back(static_cast<int32_t>(units == 1 ? i % 2 : i % units));
  }
  return labels;
}

StepInput Input(const std::vector<float>& x, const std::vector<int32_t>& y) {
  StepInput in;
  in.features = x.data();
  in.labels = y.data();
  in.batch = static_cast<int64_t>(y.size());
  in.weights_version = 1;
  return in;
}

TEST(CpuBackendLoss, GradientsMatchFiniteDifferences) {
  const std::vector<float> x = RandomFloats(kBatch * kFeatures, 21, -1, 1);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const ModelSpec spec = Model(c.units, c.activation);
    std::unique_ptr<Backend> backend = MakeBackend(spec, c.loss, c.input);
    ASSERT_NE(backend, nullptr);
    ModelVariables vars = MakeVariables(spec, Init::kRandom, 3);
    const std::vector<int32_t> y = Labels(c.units);
    StepInput in = Input(x, y);
    absl::StatusOr<StepResult> result =
        backend->TrainStep(in, vars.weight_map, &vars.gradient_map);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(std::isfinite(result->loss_sum));
    std::vector<std::vector<float>> analytic;
    for (const Tensor& g : vars.gradients) {
      analytic.emplace_back(g.flat<float>().begin(), g.flat<float>().end());
    }
    auto loss = [&]() -> double {
      ++in.weights_version;
      absl::StatusOr<StepResult> r = backend->Evaluate(in, vars.weight_map);
      EXPECT_TRUE(r.ok()) << r.status();
      return r.ok() ? r->loss_sum : 0;
    };
    for (size_t i = 0; i < vars.weights.size(); ++i) {
      Tensor& w = vars.weights[i];
      EXPECT_TRUE(GradientsClose(
          analytic[i],
          NumericGradient(loss, w.data<float>(), w.num_elements(), kEps),
          kGradientTolerance))
          << spec.variables[i].name();
    }
  }
}

// A cross-entropy on a final sigmoid (softmax), from_logits or not, is the
// loss from the logits of the same model without it, as tf.keras computes.
TEST(CpuBackendLoss, FinalActivationIsReadBehind) {
  const std::vector<float> x = RandomFloats(kBatch * kFeatures, 22, -3, 3);
  for (const auto& [units, activation, kind, input] :
       {std::make_tuple(1, "sigmoid", LossKind::kBinaryCrossEntropy,
                        LossInput::kProbabilities),
        std::make_tuple(1, "sigmoid", LossKind::kBinaryCrossEntropy,
                        LossInput::kLogits),
        std::make_tuple(3, "softmax", LossKind::kSparseCrossEntropy,
                        LossInput::kProbabilities),
        std::make_tuple(3, "softmax", LossKind::kSparseCrossEntropy,
                        LossInput::kLogits),
        std::make_tuple(3, "softmax", LossKind::kCategoricalCrossEntropy,
                        LossInput::kProbabilities)}) {
    SCOPED_TRACE(absl::StrCat(
        LossKindName(kind), " ",
        input == LossInput::kLogits ? "from logits" : "from probabilities"));
    const ModelSpec with = Model(units, activation);
    const ModelSpec without = Model(units, "linear");
    std::unique_ptr<Backend> probabilities = MakeBackend(with, kind, input);
    std::unique_ptr<Backend> logits =
        MakeBackend(without, kind, LossInput::kLogits);
    ASSERT_NE(probabilities, nullptr);
    ASSERT_NE(logits, nullptr);
    ModelVariables a = MakeVariables(with, Init::kRandom, 4);
    ModelVariables b = MakeVariables(without, Init::kRandom, 4);
    const std::vector<int32_t> y = Labels(units);
    absl::StatusOr<StepResult> ra =
        probabilities->TrainStep(Input(x, y), a.weight_map, &a.gradient_map);
    absl::StatusOr<StepResult> rb =
        logits->TrainStep(Input(x, y), b.weight_map, &b.gradient_map);
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_EQ(ra->loss_sum, rb->loss_sum);
    EXPECT_EQ(ra->correct, rb->correct);
    for (size_t i = 0; i < a.gradients.size(); ++i) {
      const auto ga = a.gradients[i].flat<float>();
      const auto gb = b.gradients[i].flat<float>();
      EXPECT_EQ(std::vector<float>(ga.begin(), ga.end()),
                std::vector<float>(gb.begin(), gb.end()));
    }
  }
}

TEST(CpuBackendLoss, EvaluateGivesBinaryScores) {
  const ModelSpec spec = Model(1, "sigmoid");
  std::unique_ptr<Backend> backend = MakeBackend(
      spec, LossKind::kBinaryCrossEntropy, LossInput::kProbabilities);
  ASSERT_NE(backend, nullptr);
  ModelVariables vars = MakeVariables(spec, Init::kRandom, 5);
  const std::vector<float> x = RandomFloats(kBatch * kFeatures, 23, -1, 1);
  const std::vector<int32_t> y = Labels(1);
  std::vector<float> scores(kBatch, NAN);
  StepInput in = Input(x, y);
  in.scores = scores.data();
  absl::StatusOr<StepResult> r = backend->Evaluate(in, vars.weight_map);
  ASSERT_TRUE(r.ok()) << r.status();
  // The logits: the loss and the accuracy follow from them.
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < kBatch; ++i) {
    ASSERT_TRUE(std::isfinite(scores[i])) << i;
    const double z = scores[i];
    loss += std::max(z, 0.0) - z * y[i] + std::log1p(std::exp(-std::abs(z)));
    if ((z > 0) == (y[i] == 1)) ++correct;
  }
  EXPECT_NEAR(r->loss_sum, loss, 1e-9);
  EXPECT_EQ(r->correct, correct);
}

TEST(CpuBackendLoss, LabelsOutsideTheLossAreRefused) {
  const ModelSpec spec = Model(1, "sigmoid");
  std::unique_ptr<Backend> backend = MakeBackend(
      spec, LossKind::kBinaryCrossEntropy, LossInput::kProbabilities);
  ASSERT_NE(backend, nullptr);
  ModelVariables vars = MakeVariables(spec, Init::kRandom, 6);
  const std::vector<float> x(2 * kFeatures, 0.5f);
  const std::vector<int32_t> y = {1, 4};
  const absl::Status status =
      backend->TrainStep(Input(x, y), vars.weight_map, &vars.gradient_map)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("label 4 of example 1 is not 0 or 1"),
            absl::string_view::npos)
      << status;
}

// Seed 000's MLP compiles with loss="mse" on one-hot labels: a softmax
// output trained on mse. A few steps of SGD on a learnable rule lower it, as
// they do each other loss.
TEST(CpuBackendLoss, SgdLowersEachLoss) {
  const std::vector<float> x = RandomFloats(32 * kFeatures, 24, -1, 1);
  for (const auto& [units, activation, kind] :
       {std::make_tuple(3, "softmax", LossKind::kMeanSquaredError),
        std::make_tuple(3, "softmax", LossKind::kMeanAbsoluteError),
        std::make_tuple(3, "linear", LossKind::kHuber),
        std::make_tuple(3, "softmax", LossKind::kCategoricalCrossEntropy),
        std::make_tuple(1, "sigmoid", LossKind::kBinaryCrossEntropy)}) {
    SCOPED_TRACE(LossKindName(kind));
    const ModelSpec spec = Model(units, activation);
    std::unique_ptr<Backend> backend =
        MakeBackend(spec, kind, LossInput::kProbabilities);
    ASSERT_NE(backend, nullptr);
    ModelVariables vars = MakeVariables(spec, Init::kRandom, 7);
    // The label follows the first feature's sign (and the second's).
    std::vector<int32_t> y;
    for (int i = 0; i < 32; ++i) {
      const int positive = x[i * kFeatures] > 0 ? 1 : 0;
      y.push_back(units == 1 ? positive
                             : positive + (x[i * kFeatures + 1] > 0 ? 1 : 0));
    }
    StepInput in = Input(x, y);
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
      in.weights_version = step + 1;
      absl::StatusOr<StepResult> r =
          backend->TrainStep(in, vars.weight_map, &vars.gradient_map);
      ASSERT_TRUE(r.ok()) << r.status();
      if (step == 0) first = r->loss_sum;
      last = r->loss_sum;
      for (size_t v = 0; v < vars.weights.size(); ++v) {
        auto w = vars.weights[v].flat<float>();
        const auto g = vars.gradients[v].flat<float>();
        // Gradients are sums over the batch: divide by it.
        for (size_t k = 0; k < w.size(); ++k) w[k] -= 0.5f * g[k] / 32;
      }
    }
    EXPECT_LT(last, 0.8 * first) << "first " << first << ", last " << last;
  }
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
