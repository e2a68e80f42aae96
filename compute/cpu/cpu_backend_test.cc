#include "compute/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compute/cpu/model_test_util.h"
#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Finite differences: central, eps 1e-3, on float32 forward passes; a
// gradient passes when max |analytic - numeric| <= 1e-2 * its largest
// numeric component (test_util.h's GradientsClose).
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

// Conv (same, fused ReLU, L2) -> pool -> conv (valid) -> ReLU layer ->
// flatten -> dropout -> dense softmax (L2).
std::string TinyCnn() {
  return KerasModel(
      "7, 7, 2",
      {KerasLayer("Conv2D", absl::StrCat(R"("name": "conv", "filters": 3,
             "kernel_size": 3, "padding": "same", "activation": "relu", )",
                                         kL2Field)),
       KerasLayer("MaxPooling2D", R"("name": "pool", "pool_size": 2)"),
       KerasLayer("Conv2D",
                  R"("name": "conv_1", "filters": 4, "kernel_size": 2)"),
       KerasLayer("Activation", R"("name": "act", "activation": "relu")"),
       KerasLayer("Flatten", R"("name": "flatten")"),
       KerasLayer("Dropout", R"("name": "dropout", "rate": 0.3)"),
       KerasLayer("Dense", absl::StrCat(R"("name": "dense", "units": 5,
             "activation": "softmax", )",
                                        kL2Field))});
}

// Flatten -> dense ReLU (L2) -> dropout -> dense -> softmax layer.
std::string TinyMlp() {
  return KerasModel(
      "4, 3", {KerasLayer("Flatten", R"("name": "flatten")"),
               KerasLayer("Dense", absl::StrCat(R"("name": "dense", "units": 6,
                      "activation": "relu", )",
                                                kL2Field)),
               KerasLayer("Dropout", R"("name": "dropout", "rate": 0.5)"),
               KerasLayer("Dense", R"("name": "dense_1", "units": 3)"),
               KerasLayer("Activation", R"("name": "probs",
                      "activation": "softmax")")});
}

// Embedding -> flatten -> dense softmax.
std::string TinyEmbedding() {
  return KerasModel("4", {KerasLayer("Embedding", R"("name": "embedding",
                           "input_dim": 7, "output_dim": 3)"),
                          KerasLayer("Flatten", R"("name": "flatten")"),
                          KerasLayer("Dense", R"("name": "dense", "units": 3,
                           "activation": "softmax")")});
}

std::unique_ptr<Backend> MakeBackend(const ModelSpec& spec,
                                     const CpuBackendOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      CreateCpuBackend(spec, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

int64_t InputSize(const ModelSpec& spec) {
  int64_t n = 1;
  for (int64_t d : spec.input_shape) n *= d;
  return n;
}

// Compares every variable's analytic gradient of loss_sum + batch * l2_loss
// with central differences. The step and example offset stay fixed, so
// every evaluation draws the same dropout masks; the weights version changes
// with every evaluation, so no reordered kernel is reused stale.
void ExpectGradientsMatchFiniteDifferences(const ModelSpec& spec,
                                           const CpuBackendOptions& options,
                                           const void* features,
                                           const std::vector<int32_t>& labels) {
  std::unique_ptr<Backend> backend = MakeBackend(spec, options);
  ASSERT_NE(backend, nullptr);
  ModelVariables vars = MakeVariables(spec, Init::kRandom);
  StepInput in;
  in.features = features;
  in.labels = labels.data();
  in.batch = static_cast<int64_t>(labels.size());
  in.step = 5;
  in.example_offset = 2;
  in.weights_version = 1;
  absl::StatusOr<StepResult> result =
      backend->TrainStep(in, vars.weight_map, &vars.gradient_map);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::vector<float>> analytic;
  for (const Tensor& g : vars.gradients) {
    analytic.emplace_back(g.flat<float>().begin(), g.flat<float>().end());
  }
  auto loss = [&]() -> double {
    ++in.weights_version;
    absl::StatusOr<StepResult> r =
        backend->TrainStep(in, vars.weight_map, &vars.gradient_map);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->loss_sum + in.batch * r->l2_loss : 0;
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

TEST(CpuBackend, CnnGradientsMatchFiniteDifferences) {
  const ModelSpec spec = MustParse(TinyCnn());
  const std::vector<float> x = RandomFloats(3 * InputSize(spec), 7, 0, 1);
  ExpectGradientsMatchFiniteDifferences(spec, {}, x.data(), {0, 3, 4});
}

TEST(CpuBackend, MlpGradientsMatchFiniteDifferences) {
  const ModelSpec spec = MustParse(TinyMlp());
  const std::vector<float> x = RandomFloats(3 * InputSize(spec), 8, -1, 1);
  ExpectGradientsMatchFiniteDifferences(spec, {}, x.data(), {2, 0, 1});
}

TEST(CpuBackend, MeanSquaredErrorGradientsMatchFiniteDifferences) {
  // The softmax is computed (and differentiated) for MSE.
  const ModelSpec spec = MustParse(TinyMlp());
  const std::vector<float> x = RandomFloats(3 * InputSize(spec), 9, -1, 1);
  CpuBackendOptions options;
  options.loss = LossKind::kMeanSquaredError;
  ExpectGradientsMatchFiniteDifferences(spec, options, x.data(), {1, 1, 0});
}

TEST(CpuBackend, EmbeddingGradientsMatchFiniteDifferences) {
  const ModelSpec spec = MustParse(TinyEmbedding());
  // Id 5 repeats (its row's gradient accumulates); ids 1 and 6 are unused.
  const std::vector<int32_t> ids = {5, 0, 2, 5, 3, 4, 0, 5, 2, 2, 3, 5};
  ExpectGradientsMatchFiniteDifferences(spec, {}, ids.data(), {0, 2, 1});
}

// Features in [0, 1) and labels in [0, 10) for a Fashion-MNIST-shaped model.
struct Batch {
  std::vector<float> features;
  std::vector<int32_t> labels;
};

Batch RandomBatch(int64_t batch, int64_t input_size, uint32_t seed) {
  Batch b;
  b.features = RandomFloats(batch * input_size, seed, 0, 1);
  for (int64_t i = 0; i < batch; ++i) {
    b.labels.push_back(static_cast<int32_t>((i * 7 + seed) % 10));
  }
  return b;
}

StepInput Input(const Batch& b, int64_t step = 0, int64_t offset = 0) {
  StepInput in;
  in.features = b.features.data();
  in.labels = b.labels.data();
  in.batch = static_cast<int64_t>(b.labels.size());
  in.step = step;
  in.example_offset = offset;
  in.weights_version = 1;
  return in;
}

TEST(CpuBackend, ShippedModelsTrainOnFullAndSmallerLastBatches) {
  for (const char* name : {"mlp", "cnn"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<ModelSpec> spec = LoadModel(name, 42);
    ASSERT_TRUE(spec.ok()) << spec.status();
    CpuBackendOptions options;
    options.num_threads = 2;
    std::unique_ptr<Backend> backend = MakeBackend(*spec, options);
    ASSERT_NE(backend, nullptr);
    ModelVariables vars = MakeVariables(*spec, Init::kKeras);
    // The cnn declares [28, 28, 1]; both are fed [batch, 28, 28].
    for (int64_t batch : {64, 17, 64}) {
      SCOPED_TRACE(batch);
      const Batch b = RandomBatch(batch, 784, static_cast<uint32_t>(batch));
      for (Tensor& g : vars.gradients) {
        std::fill(g.flat<float>().begin(), g.flat<float>().end(), NAN);
      }
      absl::StatusOr<StepResult> r =
          backend->TrainStep(Input(b), vars.weight_map, &vars.gradient_map);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->examples, batch);
      EXPECT_TRUE(std::isfinite(r->loss_sum));
      // Ten classes from a fresh Glorot init: about log(10) per example.
      EXPECT_GT(r->loss_sum / batch, 1.0);
      EXPECT_LT(r->loss_sum / batch, 5.0);
      EXPECT_GE(r->correct, 0);
      EXPECT_LE(r->correct, batch);
      // Every element written (no NaN left), and every variable learns.
      EXPECT_TRUE(AllFinite(vars.gradients));
      for (size_t i = 0; i < vars.gradients.size(); ++i) {
        const Tensor& g = vars.gradients[i];
        EXPECT_EQ(g.shape(), vars.weights[i].shape());
        EXPECT_TRUE(std::any_of(g.flat<float>().begin(), g.flat<float>().end(),
                                [](float v) { return v != 0; }))
            << spec->variables[i].name();
      }
    }
  }
}

// Max |a - b| over max |a|.
double RelativeDifference(const std::vector<Tensor>& a,
                          const std::vector<std::vector<float>>& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    absl::Span<const float> x = a[i].flat<float>();
    for (size_t j = 0; j < x.size(); ++j) {
      worst = std::max(worst, std::abs(static_cast<double>(x[j]) - b[i][j]));
      scale = std::max(scale, std::abs(static_cast<double>(x[j])));
    }
  }
  return worst / scale;
}

std::vector<std::vector<float>> Copy(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> copy;
  for (const Tensor& t : tensors) {
    copy.emplace_back(t.flat<float>().begin(), t.flat<float>().end());
  }
  return copy;
}

TEST(CpuBackend, GradientSumsDoNotDependOnHowTheBatchIsSplit) {
  // The mlp has Dropout(0.4); the cnn has L2 penalties.
  for (const char* name : {"mlp", "cnn"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<ModelSpec> spec = LoadModel(name, 3);
    ASSERT_TRUE(spec.ok()) << spec.status();
    std::unique_ptr<Backend> backend = MakeBackend(*spec);
    ModelVariables vars = MakeVariables(*spec, Init::kKeras);
    const Batch whole = RandomBatch(8, 784, 11);
    ASSERT_TRUE(backend
                    ->TrainStep(Input(whole, /*step=*/9), vars.weight_map,
                                &vars.gradient_map)
                    .ok());
    const std::vector<std::vector<float>> expected = Copy(vars.gradients);

    // The same step as two workers' halves, examples [0, 4) and [4, 8).
    std::vector<std::vector<float>> sum;
    for (int64_t offset : {0, 4}) {
      Batch half;
      half.features.assign(whole.features.begin() + offset * 784,
                           whole.features.begin() + (offset + 4) * 784);
      half.labels.assign(whole.labels.begin() + offset,
                         whole.labels.begin() + offset + 4);
      ASSERT_TRUE(backend
                      ->TrainStep(Input(half, /*step=*/9, offset),
                                  vars.weight_map, &vars.gradient_map)
                      .ok());
      std::vector<std::vector<float>> part = Copy(vars.gradients);
      if (sum.empty()) {
        sum = part;
      } else {
        for (size_t i = 0; i < sum.size(); ++i) {
          for (size_t j = 0; j < sum[i].size(); ++j) sum[i][j] += part[i][j];
        }
      }
    }
    for (size_t i = 0; i < sum.size(); ++i) {
      std::copy(sum[i].begin(), sum[i].end(), vars.gradients[i].data<float>());
    }
    EXPECT_LE(RelativeDifference(vars.gradients, expected), 1e-5);

    // Masks change with the step: another step's gradients differ (mlp).
    if (std::string(name) == "mlp") {
      ASSERT_TRUE(backend
                      ->TrainStep(Input(whole, /*step=*/10), vars.weight_map,
                                  &vars.gradient_map)
                      .ok());
      EXPECT_GT(RelativeDifference(vars.gradients, expected), 1e-2);
    }
  }
}

TEST(CpuBackend, ReportsEachGradientFinalOnceLastLayersFirst) {
  // The cnn has L2 penalties: their gradient is part of what is reported.
  absl::StatusOr<ModelSpec> spec = LoadModel("cnn", 3);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::unique_ptr<Backend> backend = MakeBackend(*spec);
  ModelVariables vars = MakeVariables(*spec, Init::kKeras);
  const Batch b = RandomBatch(8, 784, 4);
  ASSERT_TRUE(
      backend->TrainStep(Input(b, 3), vars.weight_map, &vars.gradient_map)
          .ok());
  const std::vector<std::vector<float>> expected = Copy(vars.gradients);
  for (Tensor& g : vars.gradients) {
    std::fill(g.data<float>(), g.data<float>() + g.num_elements(), NAN);
  }
  // What each report saw, in the order of the reports.
  std::vector<std::string> order;
  std::map<std::string, std::vector<float>> at_report;
  StepInput input = Input(b, 3);
  input.gradient_ready = [&](const std::string& name,
                             absl::Span<float> gradient) {
    order.push_back(name);
    EXPECT_EQ(vars.gradient_map.at(name)->data<float>(), gradient.data())
        << name;
    at_report[name].assign(gradient.begin(), gradient.end());
  };
  ASSERT_TRUE(
      backend->TrainStep(input, vars.weight_map, &vars.gradient_map).ok());
  // Every variable once; at its report its gradient was already the final
  // one, bit for bit, and equal to a step without reports.
  ASSERT_EQ(order.size(), spec->variables.size());
  ASSERT_EQ(at_report.size(), spec->variables.size());
  for (size_t v = 0; v < spec->variables.size(); ++v) {
    const std::string& name = spec->variables[v].name();
    const float* final_values = vars.gradients[v].data<float>();
    EXPECT_EQ(
        at_report[name],
        std::vector<float>(final_values,
                           final_values + vars.gradients[v].num_elements()))
        << name;
    EXPECT_EQ(at_report[name], expected[v]) << name;
  }
  // Backward order: the output layer's variables come first, the first
  // layer's last.
  const std::string last_layer = spec->variables.back().name();
  const std::string first_layer = spec->variables.front().name();
  EXPECT_LT(std::find(order.begin(), order.end(), last_layer) - order.begin(),
            std::find(order.begin(), order.end(), first_layer) - order.begin());
}

TEST(CpuBackend, EvaluateMatchesTrainStepLossWithoutDropout) {
  absl::StatusOr<ModelSpec> spec = LoadModel("cnn", 5);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::unique_ptr<Backend> backend = MakeBackend(*spec);
  ModelVariables vars = MakeVariables(*spec, Init::kKeras);
  const Batch b = RandomBatch(16, 784, 2);
  absl::StatusOr<StepResult> train =
      backend->TrainStep(Input(b), vars.weight_map, &vars.gradient_map);
  absl::StatusOr<StepResult> eval =
      backend->Evaluate(Input(b), vars.weight_map);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_NEAR(eval->loss_sum, train->loss_sum, 1e-5 * train->loss_sum);
  EXPECT_GT(eval->l2_loss, 0);
  EXPECT_DOUBLE_EQ(eval->l2_loss, train->l2_loss);
  EXPECT_EQ(eval->correct, train->correct);
  EXPECT_EQ(eval->examples, 16);
}

TEST(CpuBackend, EvaluateTurnsDropoutOff) {
  absl::StatusOr<ModelSpec> spec = LoadModel("mlp", 5);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::unique_ptr<Backend> backend = MakeBackend(*spec);
  ModelVariables vars = MakeVariables(*spec, Init::kKeras);
  const Batch b = RandomBatch(16, 784, 2);
  absl::StatusOr<StepResult> first =
      backend->Evaluate(Input(b, /*step=*/1), vars.weight_map);
  absl::StatusOr<StepResult> second =
      backend->Evaluate(Input(b, /*step=*/2), vars.weight_map);
  absl::StatusOr<StepResult> train = backend->TrainStep(
      Input(b, /*step=*/1), vars.weight_map, &vars.gradient_map);
  ASSERT_TRUE(first.ok() && second.ok() && train.ok());
  // No mask: the step does not matter in inference, and training differs.
  EXPECT_EQ(first->loss_sum, second->loss_sum);
  EXPECT_NE(first->loss_sum, train->loss_sum);
}

TEST(CpuBackend, EmptyBatchGivesZeroGradients) {
  // A worker left without examples in an epoch's last step still pushes.
  absl::StatusOr<ModelSpec> spec = LoadModel("cnn", 5);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::unique_ptr<Backend> backend = MakeBackend(*spec);
  ModelVariables vars = MakeVariables(*spec, Init::kKeras);
  for (Tensor& g : vars.gradients) {
    std::fill(g.flat<float>().begin(), g.flat<float>().end(), NAN);
  }
  StepInput in;  // batch 0, no features or labels.
  absl::StatusOr<StepResult> r =
      backend->TrainStep(in, vars.weight_map, &vars.gradient_map);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->examples, 0);
  EXPECT_EQ(r->loss_sum, 0);
  EXPECT_GT(r->l2_loss, 0);  // The penalty is the weights'; its gradient
                             // is batch (0) times 2 * l2 * w.
  for (const Tensor& g : vars.gradients) {
    for (float v : g.flat<float>()) ASSERT_EQ(v, 0.0f);
  }
}

TEST(CpuBackend, RefusesBadInputsWithInvalidArgument) {
  absl::StatusOr<ModelSpec> spec = LoadModel("mlp", 5);
  ASSERT_TRUE(spec.ok()) << spec.status();
  CpuBackendOptions options;
  options.max_batch = 8;
  std::unique_ptr<Backend> backend = MakeBackend(*spec, options);
  ModelVariables vars = MakeVariables(*spec, Init::kKeras);
  const Batch b = RandomBatch(8, 784, 2);
  auto code = [&](const StepInput& in, const Weights& weights,
                  Gradients* gradients) {
    return backend->TrainStep(in, weights, gradients).status().code();
  };
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

  const Batch big = RandomBatch(9, 784, 2);
  EXPECT_EQ(code(Input(big), vars.weight_map, &vars.gradient_map), kInvalid);
  StepInput no_labels = Input(b);
  no_labels.labels = nullptr;
  EXPECT_EQ(code(no_labels, vars.weight_map, &vars.gradient_map), kInvalid);
  Batch bad_label = b;
  bad_label.labels[3] = 10;
  EXPECT_EQ(code(Input(bad_label), vars.weight_map, &vars.gradient_map),
            kInvalid);

  Weights missing = vars.weight_map;
  missing.erase("dense_1/bias");
  absl::Status status =
      backend->TrainStep(Input(b), missing, &vars.gradient_map).status();
  EXPECT_EQ(status.code(), kInvalid);
  EXPECT_NE(status.message().find("dense_1/bias"), std::string::npos) << status;

  absl::StatusOr<Tensor> wrong = Tensor::Create(DT_FLOAT, {10, 200});
  ASSERT_TRUE(wrong.ok());
  Gradients misshapen = vars.gradient_map;
  misshapen["dense_1/kernel"] = &*wrong;
  status = backend->TrainStep(Input(b), vars.weight_map, &misshapen).status();
  EXPECT_EQ(status.code(), kInvalid);
  EXPECT_NE(status.message().find("[200, 10]"), std::string::npos) << status;

  // Still trains after the refusals.
  EXPECT_TRUE(
      backend->TrainStep(Input(b), vars.weight_map, &vars.gradient_map).ok());
}

TEST(CpuBackend, AnEmbeddingsGradientIsZeroAtEveryRowNoIdNames) {
  // Gradients are dense and full-size: a step's gradient of a table holds
  // zeros at the rows its batch does not name, whatever the buffer held.
  // worker/trainer_covered.cc adds a covered batch's gradients into the
  // step's over every element, and relies on it.
  const ModelSpec spec = MustParse(TinyEmbedding());
  std::unique_ptr<Backend> backend = MakeBackend(spec);
  ModelVariables vars = MakeVariables(spec, Init::kKeras);
  const std::vector<int32_t> labels = {0, 2};
  StepInput in;
  in.labels = labels.data();
  in.batch = 2;
  // Step 1 names rows 1 and 6, step 2 neither (ids 0, 2, 3, 4, 5).
  const std::vector<int32_t> first = {1, 6, 1, 6, 6, 1, 1, 6};
  const std::vector<int32_t> second = {5, 0, 2, 5, 3, 4, 0, 5};
  Tensor* table = vars.gradient_map.at("embedding/embeddings");
  for (const std::vector<int32_t>* ids : {&first, &second}) {
    std::fill(table->flat<float>().begin(), table->flat<float>().end(), NAN);
    in.features = ids->data();
    ASSERT_TRUE(
        backend->TrainStep(in, vars.weight_map, &vars.gradient_map).ok());
    const float* g = table->data<float>();
    for (int row = 0; row < 7; ++row) {
      const bool named = std::count(ids->begin(), ids->end(), row) > 0;
      for (int j = 0; j < 3; ++j) {
        if (named) {
          EXPECT_TRUE(std::isfinite(g[row * 3 + j])) << row;
        } else {
          EXPECT_EQ(g[row * 3 + j], 0.0f) << "row " << row;
        }
      }
    }
  }
}

TEST(CpuBackend, RefusesEmbeddingIdsOutsideTheTable) {
  const ModelSpec spec = MustParse(TinyEmbedding());
  std::unique_ptr<Backend> backend = MakeBackend(spec);
  ModelVariables vars = MakeVariables(spec, Init::kKeras);
  const std::vector<int32_t> ids = {0, 1, 2, 7};
  const std::vector<int32_t> labels = {0};
  StepInput in;
  in.features = ids.data();
  in.labels = labels.data();
  in.batch = 1;
  absl::Status status =
      backend->TrainStep(in, vars.weight_map, &vars.gradient_map).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("embedding"), std::string::npos) << status;
}

TEST(CpuBackend, RefusesModelsWhoseOutputIsNotAVector) {
  const ModelSpec spec = MustParse(KerasModel(
      "6, 6, 1", {KerasLayer("Conv2D", R"("name": "conv", "filters": 2,
                               "kernel_size": 3)")}));
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCpuBackend(spec, {});
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
