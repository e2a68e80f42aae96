// GpuBackend against CpuBackend on the same model, weights and batch: every
// gradient, the loss, the L2 penalty and the accuracy count, for the two
// shipped models, small models covering every layer and both losses, odd,
// empty and changing batch sizes, and bad inputs.
//
// Tolerance: each gradient's max_i |gpu_i - cpu_i| <= 1e-4 * max_i |cpu_i|
// (float32 with different summation orders); loss sums to 1e-4 relative;
// the accuracy count exactly (the inputs keep arg-max ties improbable). Both
// backends draw the same dropout masks (the same keys), so dropout models
// compare too.
//
// Without a GPU every test that needs one skips, printing why.
#include "worker/gpu/gpu_backend.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cuda_probe.h"
#include "gtest/gtest.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cpu/model_test_util.h"

namespace pstrain {
namespace worker {
namespace {

using cpu::Init;
using cpu::KerasLayer;
using cpu::KerasModel;
using cpu::kL2Field;
using cpu::MakeVariables;
using cpu::ModelVariables;
using cpu::MustParse;

constexpr double kRelative = 1e-4;

// Conv (same, stride 2, ReLU, L2) -> pool (same) -> conv (valid) -> ReLU
// layer -> flatten -> dropout -> dense softmax (L2).
std::string SmallCnn() {
  return KerasModel(
      "9, 9, 2",
      {KerasLayer("Conv2D", absl::StrCat(R"("name": "conv", "filters": 3,
             "kernel_size": 3, "strides": 1, "padding": "same",
             "activation": "relu", )",
                                         kL2Field)),
       KerasLayer("MaxPooling2D",
                  R"("name": "pool", "pool_size": 2, "padding": "same")"),
       KerasLayer("Conv2D", R"("name": "conv_1", "filters": 4, "kernel_size": 2,
             "use_bias": false)"),
       KerasLayer("Activation", R"("name": "act", "activation": "relu")"),
       KerasLayer("Flatten", R"("name": "flatten")"),
       KerasLayer("Dropout", R"("name": "dropout", "rate": 0.3)"),
       KerasLayer("Dense", absl::StrCat(R"("name": "dense", "units": 5,
             "activation": "softmax", )",
                                        kL2Field))});
}

// Embedding -> flatten -> dense ReLU -> dense (logits).
std::string SmallEmbedding() {
  return KerasModel("6",
                    {KerasLayer("Embedding", R"("name": "embedding",
                           "input_dim": 13, "output_dim": 4)"),
                     KerasLayer("Flatten", R"("name": "flatten")"),
                     KerasLayer("Dense", R"("name": "dense", "units": 8,
                           "activation": "relu")"),
                     KerasLayer("Dense", R"("name": "dense_1", "units": 3)")});
}

// Flatten -> dense ReLU -> dense 4 -> softmax layer (for MSE on the
// probabilities) and a one-output regression head variant.
std::string SmallMse(int outputs) {
  return KerasModel(
      "5",
      {KerasLayer("Dense", R"("name": "dense", "units": 7,
                      "activation": "relu")"),
       KerasLayer("Dense",
                  absl::StrCat(R"("name": "dense_1", "units": )", outputs)),
       KerasLayer("Activation",
                  absl::StrCat(R"("name": "out",
                      "activation": ")",
                               outputs == 1 ? "linear" : "softmax", R"(")"))});
}

struct Batch {
  std::vector<float> features;
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;
};

Batch RandomBatch(const ModelSpec& spec, int64_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  Batch batch;
  int64_t per_example = 1;
  for (int64_t d : spec.layers.front().input_shape) per_example *= d;
  const LayerSpec& first = spec.layers.front();
  for (int64_t i = 0; i < n * per_example; ++i) {
    if (first.kind == LayerKind::kEmbedding) {
      batch.ids.push_back(generator() % first.input_dim);
    } else {
      batch.features.push_back(generator() / 4294967296.0f);
    }
  }
  const int64_t classes = spec.output_shape[0];
  for (int64_t i = 0; i < n; ++i) {
    batch.labels.push_back(classes == 1 ? generator() % 3
                                        : generator() % classes);
  }
  return batch;
}

StepInput InputOf(const Batch& batch, int64_t n, int64_t step) {
  StepInput input;
  input.features = batch.ids.empty()
                       ? static_cast<const void*>(batch.features.data())
                       : static_cast<const void*>(batch.ids.data());
  input.labels = batch.labels.data();
  input.batch = n;
  input.step = step;
  input.example_offset = 3 * n;  // As a second worker of three would.
  input.weights_version = static_cast<uint64_t>(step + 1);
  return input;
}

::testing::AssertionResult Near(const Tensor& got, const Tensor& want) {
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double scale = 0, worst = 0;
  int64_t worst_index = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
    const double error = std::fabs(static_cast<double>(g[i]) - w[i]);
    if (!(error <= worst)) {  // NaN counts as the worst.
      worst = std::isnan(error) ? INFINITY : error;
      worst_index = i;
    }
  }
  if (worst <= kRelative * std::max(scale, 1e-30)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "element " << worst_index << ": GPU " << g[worst_index] << ", CPU "
         << w[worst_index] << " (error " << worst << ", max |CPU| " << scale
         << ")";
}

bool HaveGpu() { return CudaDeviceCount().ok(); }

#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    absl::StatusOr<int> count = CudaDeviceCount();                           \
    if (!count.ok()) {                                                       \
      GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message() \
                   << ")";                                                   \
    }                                                                        \
  } while (false)

struct Pair {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<Backend> gpu;
};

Pair MakePair(const ModelSpec& spec, LossKind loss) {
  CpuBackendOptions cpu_options;
  cpu_options.num_threads = 1;
  cpu_options.run_seed = 7;
  cpu_options.replica = 1;
  cpu_options.loss = loss;
  GpuBackendOptions gpu_options;
  gpu_options.devices = {0};
  gpu_options.run_seed = 7;
  gpu_options.replica = 1;
  gpu_options.loss = loss;
  Pair pair;
  absl::StatusOr<std::unique_ptr<Backend>> cpu =
      CreateCpuBackend(spec, cpu_options);
  absl::StatusOr<std::unique_ptr<Backend>> gpu =
      CreateGpuBackend(spec, gpu_options);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (cpu.ok()) pair.cpu = std::move(*cpu);
  if (gpu.ok()) pair.gpu = std::move(*gpu);
  return pair;
}

// Trains `steps` steps of batch sizes `sizes` (cycled) on both backends from
// the same weights, comparing each step's results and gradients; between
// steps, applies the CPU's gradients to the shared weights (plain SGD), so
// later steps see new weights (and a new weights_version).
void CompareTraining(const std::string& what, const ModelSpec& spec,
                     LossKind loss, const std::vector<int64_t>& sizes,
                     int steps) {
  SCOPED_TRACE(what);
  Pair pair = MakePair(spec, loss);
  ASSERT_NE(pair.cpu, nullptr);
  ASSERT_NE(pair.gpu, nullptr);
  ModelVariables cpu_vars = MakeVariables(spec, Init::kKeras, 3);
  ModelVariables gpu_vars = MakeVariables(spec, Init::kKeras, 3);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const int64_t n = sizes[step % sizes.size()];
    const Batch batch = RandomBatch(spec, std::max<int64_t>(n, 1), 100 + step);
    const StepInput input = InputOf(batch, n, step);
    absl::StatusOr<StepResult> want =
        pair.cpu->TrainStep(input, cpu_vars.weight_map, &cpu_vars.gradient_map);
    absl::StatusOr<StepResult> got =
        pair.gpu->TrainStep(input, cpu_vars.weight_map, &gpu_vars.gradient_map);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->examples, want->examples);
    EXPECT_EQ(got->correct, want->correct);
    EXPECT_NEAR(got->loss_sum, want->loss_sum,
                kRelative * std::max(1.0, std::fabs(want->loss_sum)));
    EXPECT_NEAR(got->l2_loss, want->l2_loss,
                kRelative * std::max(1e-6, std::fabs(want->l2_loss)));
    for (size_t v = 0; v < spec.variables.size(); ++v) {
      EXPECT_TRUE(Near(gpu_vars.gradients[v], cpu_vars.gradients[v]))
          << spec.variables[v].name();
    }
    for (size_t v = 0; v < spec.variables.size(); ++v) {
      float* w = cpu_vars.weights[v].data<float>();
      const float* g = cpu_vars.gradients[v].data<float>();
      const float scale = 0.1f / std::max<int64_t>(n, 1);
      for (int64_t i = 0; i < cpu_vars.weights[v].num_elements(); ++i) {
        w[i] -= scale * g[i];
      }
    }
    // New weights: a new version (backends may cache per version).
    StepInput eval_input = input;
    eval_input.weights_version += 1000;
    absl::StatusOr<StepResult> want_eval =
        pair.cpu->Evaluate(eval_input, cpu_vars.weight_map);
    absl::StatusOr<StepResult> got_eval =
        pair.gpu->Evaluate(eval_input, cpu_vars.weight_map);
    ASSERT_TRUE(want_eval.ok()) << want_eval.status();
    ASSERT_TRUE(got_eval.ok()) << got_eval.status();
    EXPECT_EQ(got_eval->correct, want_eval->correct);
    EXPECT_NEAR(got_eval->loss_sum, want_eval->loss_sum,
                kRelative * std::max(1.0, std::fabs(want_eval->loss_sum)));
  }
}

TEST(GpuBackend, ShippedCnnMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<ModelSpec> spec = LoadModel("cnn", 42);
  ASSERT_TRUE(spec.ok()) << spec.status();
  CompareTraining("cnn", *spec, LossKind::kSparseCrossEntropy, {32, 7}, 4);
}

TEST(GpuBackend, ShippedMlpWithDropoutMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<ModelSpec> spec = LoadModel("mlp", 42);
  ASSERT_TRUE(spec.ok()) << spec.status();
  CompareTraining("mlp", *spec, LossKind::kSparseCrossEntropy, {64, 0, 5}, 5);
}

TEST(GpuBackend, EveryLayerAndLossMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  CompareTraining("small cnn", MustParse(SmallCnn()),
                  LossKind::kSparseCrossEntropy, {6, 1}, 3);
  CompareTraining("embedding", MustParse(SmallEmbedding()),
                  LossKind::kSparseCrossEntropy, {9, 4}, 3);
  CompareTraining("mse softmax", MustParse(SmallMse(4)),
                  LossKind::kMeanSquaredError, {10}, 3);
  CompareTraining("mse one output", MustParse(SmallMse(1)),
                  LossKind::kMeanSquaredError, {10, 3}, 3);
}

TEST(GpuBackend, BadIdsAndLabelsAreInvalidArgumentNamingThem) {
  SKIP_WITHOUT_GPU();
  const ModelSpec spec = MustParse(SmallEmbedding());
  Pair pair = MakePair(spec, LossKind::kSparseCrossEntropy);
  ASSERT_NE(pair.gpu, nullptr);
  ModelVariables vars = MakeVariables(spec, Init::kKeras, 3);
  Batch batch = RandomBatch(spec, 4, 5);
  batch.ids[9] = 13;  // Example 1, position 3: one past the table.
  absl::StatusOr<StepResult> result = pair.gpu->TrainStep(
      InputOf(batch, 4, 0), vars.weight_map, &vars.gradient_map);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("id 13 at position 9"),
            std::string::npos)
      << result.status();
  batch.ids[9] = 0;
  batch.labels[2] = 3;  // Three classes.
  result = pair.gpu->TrainStep(InputOf(batch, 4, 0), vars.weight_map,
                               &vars.gradient_map);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("example 2"), std::string::npos)
      << result.status();
  // The backend still works after refusing.
  batch.labels[2] = 0;
  EXPECT_TRUE(
      pair.gpu
          ->TrainStep(InputOf(batch, 4, 0), vars.weight_map, &vars.gradient_map)
          .ok());
}

TEST(GpuBackend, BadOptionsAreInvalidArgument) {
  const ModelSpec spec = MustParse(SmallMse(4));
  GpuBackendOptions options;
  options.devices = {};
  EXPECT_EQ(CreateGpuBackend(spec, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.devices = {0, 0};
  EXPECT_EQ(CreateGpuBackend(spec, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.devices = {0};
  options.max_batch = -1;
  EXPECT_EQ(CreateGpuBackend(spec, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  if (!HaveGpu()) {
    options.max_batch = 0;
    const absl::Status status = CreateGpuBackend(spec, options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  }
}

TEST(GpuBackend, OtherLossesAreUnimplementedNamingTheLossAndTheCpu) {
  // Refused before any GPU is touched: this runs without one too.
  const ModelSpec spec = MustParse(SmallMse(4));
  GpuBackendOptions options;
  options.devices = {0};
  options.loss = LossKind::kHuber;
  const absl::Status status = CreateGpuBackend(spec, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(),
            "GpuBackend: loss huber is not implemented on GPU "
            "(sparse_categorical_crossentropy and mse are): run the worker "
            "with --device=cpu");
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
