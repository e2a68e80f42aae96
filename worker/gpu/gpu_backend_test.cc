// GpuBackend against CpuBackend on the same model, weights and batch: every
// gradient, the loss, the L2 penalty and the accuracy count, for the two
// shipped models, the examples the GPU computes, small models covering
// every layer and both losses, Functional graphs (branches, merges,
// concatenation, shared layers, two inputs of floats and ids), odd, empty
// and changing batch sizes, and bad inputs.
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
#include "worker/model_input.h"

namespace pstrain {
namespace worker {
namespace {

using cpu::GraphDense;
using cpu::GraphLayer;
using cpu::GraphModel;
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

// Rows as model_input.h lays them out: int32 ids when the model takes only
// ids, else floats (ids as exact floats in their columns).
Batch RandomBatch(const ModelSpec& spec, int64_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  Batch batch;
  const bool all_ids = ModelFeedDtype(spec) == DT_INT32;
  for (int64_t b = 0; b < n; ++b) {
    for (const InputColumns& c : ModelInputColumns(spec)) {
      for (int64_t j = 0; j < c.count; ++j) {
        if (all_ids) {
          batch.ids.push_back(generator() % c.vocabulary);
        } else if (c.ids) {
          batch.features.push_back(
              static_cast<float>(generator() % c.vocabulary));
        } else {
          batch.features.push_back(generator() / 4294967296.0f - 0.5f);
        }
      }
    }
  }
  const int64_t classes = spec.output_shape[0];
  for (int64_t i = 0; i < n; ++i) {
    // One output: 0 or 1 (binary cross-entropy's labels, values for mse).
    batch.labels.push_back(classes == 1 ? generator() % 2
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

Pair MakePair(const ModelSpec& spec, LossKind loss,
              LossInput input = LossInput::kLogits) {
  CpuBackendOptions cpu_options;
  cpu_options.num_threads = 1;
  cpu_options.run_seed = 7;
  cpu_options.replica = 1;
  cpu_options.loss = loss;
  cpu_options.loss_input = input;
  GpuBackendOptions gpu_options;
  gpu_options.devices = {0};
  gpu_options.run_seed = 7;
  gpu_options.replica = 1;
  gpu_options.loss = loss;
  gpu_options.loss_input = input;
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
                     int steps, LossInput loss_input = LossInput::kLogits) {
  SCOPED_TRACE(what);
  Pair pair = MakePair(spec, loss, loss_input);
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

// The logits head of the graph models: Flatten `reads`, then Dense "out".
std::vector<std::string> Head(const std::string& reads, int classes = 3) {
  return {GraphLayer("Flatten", "flat", "", {reads}),
          GraphDense("out", classes, "flat")};
}

std::vector<std::string> Join(std::vector<std::string> a,
                              const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Batches of 6 then 1 (1 example: single-row shapes); with `mse`, a step
// of MSE (the loss that keeps a final softmax) too.
void CompareGraph(const std::string& what, const std::string& json,
                  bool mse = false) {
  const ModelSpec spec = MustParse(json);
  CompareTraining(what, spec, LossKind::kSparseCrossEntropy, {6, 1}, 2);
  if (mse) {
    CompareTraining(absl::StrCat(what, ", mse"), spec,
                    LossKind::kMeanSquaredError, {5}, 1);
  }
}

// A Functional graph: two branches from the input, Add, a Dense called
// twice (shared weights: one variable, gradients summed) and the
// Concatenate of its two calls.
TEST(GpuBackend, FunctionalGraphWithBranchAddConcatenateAndSharedDense) {
  SKIP_WITHOUT_GPU();
  const std::string shared = R"({"class_name": "Dense", "name": "shared",
      "config": {"name": "shared", "units": 5, "activation": "relu"},
      "inbound_nodes": [[["sum", 0, 0, {}]], [["a", 0, 0, {}]]]})";
  const std::string cat = R"({"class_name": "Concatenate", "name": "cat",
      "config": {"name": "cat", "axis": -1}, "inbound_nodes":
      [[["shared", 0, 0, {}], ["shared", 1, 0, {}]]]})";
  CompareGraph(
      "branch, Add, shared Dense, Concatenate",
      GraphModel("4", {GraphDense("a", 5, "x", "tanh"), GraphDense("b", 5, "x"),
                       GraphLayer("Add", "sum", "", {"a", "b"}), shared, cat,
                       GraphDense("out", 3, "cat")}),
      /*mse=*/true);
}

// Two inputs: float features through a Dense, int ids through an
// Embedding, concatenated.
TEST(GpuBackend, TwoInputsOfFloatsAndIdsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  CompareGraph(
      "two inputs",
      GraphModel("3",
                 {GraphDense("d", 4, "x", "tanh"),
                  GraphLayer("Embedding", "emb",
                             R"("input_dim": 6, "output_dim": 3)", {"ids"}),
                  GraphLayer("Flatten", "flat_ids", "", {"emb"}),
                  GraphLayer("Concatenate", "cat", "", {"d", "flat_ids"}),
                  GraphDense("out", 3, "cat")},
                 "2"),
      /*mse=*/true);
}

TEST(GpuBackend, EveryActivationMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* activation :
       {"relu", "relu6", "leaky_relu", "softmax", "log_softmax", "gelu",
        "gelu_new", "sigmoid", "hard_sigmoid", "tanh", "silu", "elu", "selu",
        "softplus"}) {
    CompareGraph(
        absl::StrCat("Dense activation ", activation),
        GraphModel("2, 4",
                   Join({GraphDense("pre", 6, "x", activation)}, Head("pre"))));
  }
  const std::vector<std::pair<std::string, std::string>> layers = {
      {"ReLU", R"("max_value": 0.3, "negative_slope": 0.1, "threshold": 0.05)"},
      {"LeakyReLU", R"("negative_slope": 0.2)"},
      {"ELU", R"("alpha": 0.7)"},
      {"Softmax", R"("axis": 1)"},  // Over the first axis of [2, 6].
      {"Activation", R"("activation": "log_softmax")"},
      {"Activation", R"("activation": "swish")"},
  };
  for (const auto& [class_name, fields] : layers) {
    CompareGraph(
        absl::StrCat(class_name, " ", fields),
        GraphModel("2, 4",
                   Join({GraphDense("pre", 6, "x"),
                         GraphLayer(class_name, "act", fields, {"pre"})},
                        Head("act"))));
  }
}

TEST(GpuBackend, EveryMergeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* merge :
       {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"}) {
    CompareGraph(merge,
                 GraphModel("4", Join({GraphDense("a", 5, "x", "tanh"),
                                       GraphDense("b", 5, "x"),
                                       GraphLayer(merge, "m", "", {"a", "b"})},
                                      Head("m"))));
  }
  // The same tensor twice among three inputs: its gradient sums both.
  CompareGraph(
      "Multiply(a, b, b)",
      GraphModel("4", Join({GraphDense("a", 5, "x", "sigmoid"),
                            GraphDense("b", 5, "x"),
                            GraphLayer("Multiply", "m", "", {"a", "b", "b"})},
                           Head("m"))));
  CompareGraph(
      "Add(a, b(a), a)",
      GraphModel("4",
                 Join({GraphDense("a", 5, "x", "tanh"), GraphDense("b", 5, "a"),
                       GraphLayer("Add", "m", "", {"a", "b", "a"})},
                      Head("m"))));
  CompareGraph(
      "Concatenate first axis, with the model input",
      GraphModel("2, 4",
                 Join({GraphDense("a", 4, "x", "tanh"), GraphDense("b", 4, "a"),
                       GraphLayer("Concatenate", "c", R"("axis": 1)",
                                  {"a", "b", "x"})},
                      Head("c"))));
}

TEST(GpuBackend, PoolingPaddingRescalingAndPermuteMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::string>> layers = {
      {"AveragePooling2D", R"("pool_size": 2)"},
      {"AveragePooling2D",
       R"("pool_size": 2, "strides": 1, "padding": "same")"},
      {"AveragePooling2D",
       R"("pool_size": 3, "strides": 2, "padding": "same")"},
      {"GlobalAveragePooling2D", ""},
      {"GlobalMaxPooling2D", ""},
      {"GlobalMaxPooling2D", R"("keepdims": true)"},
      {"ZeroPadding2D", R"("padding": [[1, 0], [2, 1]])"},
      {"Permute", R"("dims": [2, 3, 1])"},
      {"Permute", R"("dims": [3, 1, 2])"},
      {"Rescaling", R"("scale": 0.5, "offset": -0.25)"},
  };
  for (const auto& [class_name, fields] : layers) {
    CompareGraph(absl::StrCat(class_name, " ", fields),
                 GraphModel("5, 4, 2",
                            Join({GraphDense("pre", 3, "x", "tanh"),
                                  GraphLayer(class_name, "l", fields, {"pre"})},
                                 Head("l"))));
  }
  for (const char* class_name :
       {"GlobalAveragePooling1D", "GlobalMaxPooling1D"}) {
    CompareGraph(
        class_name,
        GraphModel("4, 3", Join({GraphDense("pre", 3, "x", "tanh"),
                                 GraphLayer(class_name, "l", "", {"pre"})},
                                Head("l"))));
  }
  // As images come: Rescaling first, padding, a convolution, average
  // pooling and a global pool.
  CompareGraph(
      "image pipeline",
      GraphModel(
          "7, 6, 2",
          {GraphLayer("Rescaling", "scale", R"("scale": 0.00392156862)", {"x"}),
           GraphLayer("ZeroPadding2D", "pad", R"("padding": 1)", {"scale"}),
           GraphLayer("Conv2D", "conv",
                      R"("filters": 4, "kernel_size": 3,
                                "activation": "relu")",
                      {"pad"}),
           GraphLayer("AveragePooling2D", "avg",
                      R"("pool_size": 2, "padding": "same")", {"conv"}),
           GraphLayer("GlobalMaxPooling2D", "gmp", "", {"avg"}),
           GraphDense("out", 3, "gmp")}),
      /*mse=*/true);
}

// Every example: a Functional MLP (both JSON forms), a ResNet with
// BatchNormalization, a Transformer encoder (LayerNormalization,
// MultiHeadAttention), two-input models.
TEST(GpuBackend, ExamplesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* example :
       {"examples/seed000_mlp.keras3.json", "examples/seed000_mlp.keras2.json",
        "examples/two_input.keras3.json", "examples/wide_deep.keras3.json",
        "examples/resnet_small.keras3.json",
        "examples/transformer.keras3.json"}) {
    absl::StatusOr<ModelSpec> spec = LoadModel(example, 42);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const LossKind loss = spec->output_shape[0] == 1
                              ? LossKind::kMeanSquaredError
                              : LossKind::kSparseCrossEntropy;
    CompareTraining(example, *spec, loss, {16, 3}, 2);
  }
}

// BatchNormalization (its moving statistics' "gradients" are the batch's
// statistics times the batch), LayerNormalization in each of its forms,
// and MultiHeadAttention: self-attention (causal or not), cross-attention
// with a key, a LayerNormalization shared by two branches.
TEST(GpuBackend, NormalizationAndAttentionMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* fields :
       {R"("epsilon": 0.001)", R"("center": false)", R"("scale": false)",
        R"("center": false, "scale": false)"}) {
    CompareGraph(absl::StrCat("LayerNormalization ", fields),
                 GraphModel("2, 4", Join({GraphDense("pre", 5, "x"),
                                          GraphLayer("LayerNormalization", "ln",
                                                     fields, {"pre"})},
                                         Head("ln"))));
    CompareGraph(absl::StrCat("BatchNormalization ", fields),
                 GraphModel("2, 4", Join({GraphDense("pre", 5, "x"),
                                          GraphLayer("BatchNormalization", "bn",
                                                     fields, {"pre"})},
                                         Head("bn"))));
  }
  CompareGraph(
      "BatchNormalization on the input",
      GraphModel("3", {GraphLayer("BatchNormalization", "bn", "", {"x"}),
                       GraphDense("out", 3, "bn")}),
      /*mse=*/true);
  const std::string mha = R"("num_heads": 2, "key_dim": 3)";
  const auto attention = [&](const std::string& name, const std::string& node) {
    return absl::StrCat(R"({"class_name": "MultiHeadAttention", "name": ")",
                        name, R"(", "config": {"name": ")", name, "\", ", mha,
                        R"(}, "inbound_nodes": [[)", node, "]]}");
  };
  for (const char* causal : {"false", "true"}) {
    CompareGraph(
        absl::StrCat("self-attention, causal ", causal),
        GraphModel(
            "4, 3",
            Join({GraphDense("pre", 5, "x", "tanh"),
                  attention("att", absl::StrCat(R"(["pre", 0, 0, {"value": )",
                                                R"(["pre", 0, 0], )",
                                                R"("use_causal_mask": )",
                                                causal, "}]"))},
                 Head("att"))));
  }
  CompareGraph(
      "cross-attention with a key, residual",
      GraphModel("4, 3",
                 Join({GraphDense("q", 5, "x", "tanh"), GraphDense("v", 4, "x"),
                       GraphDense("k", 6, "x", "tanh"),
                       attention("att", R"(["q", 0, 0, {}], ["v", 0, 0, {}], )"
                                        R"(["k", 0, 0, {}])"),
                       GraphLayer("Add", "res", "", {"att", "q"})},
                      Head("res"))),
      /*mse=*/true);
  const std::string ln = R"({"class_name": "LayerNormalization", "name": "ln",
      "config": {"name": "ln"}, "inbound_nodes": [[["a", 0, 0, {}]],
      [["b", 0, 0, {}]]]})";
  const std::string add = R"({"class_name": "Add", "name": "sum",
      "config": {"name": "sum"}, "inbound_nodes": [[["ln", 0, 0, {}],
      ["ln", 1, 0, {}]]]})";
  CompareGraph("LayerNormalization on two branches",
               GraphModel("2, 4", Join({GraphDense("a", 3, "x", "tanh"),
                                        GraphDense("b", 3, "x"), ln, add},
                                       Head("sum"))));
}

TEST(GpuBackend, WhatTheGpuLacksIsUnimplementedNamingTheLayer) {
  // Refused before any GPU is touched: this runs without one too.
  std::vector<std::string> reads(17, "a");
  const ModelSpec spec = MustParse(GraphModel(
      "4", Join({GraphDense("a", 3, "x"), GraphLayer("Add", "m", "", reads)},
                Head("m"))));
  const absl::Status status =
      CreateGpuBackend(spec, GpuBackendOptions()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_EQ(status.message(),
            "layer 'm': a merge of 17 inputs; the GPU merges at most 16");
}

TEST(GpuBackend, BadIdsOfASecondInputNameTheInput) {
  SKIP_WITHOUT_GPU();
  const ModelSpec spec = MustParse(
      GraphModel("3",
                 {GraphDense("d", 4, "x", "tanh"),
                  GraphLayer("Embedding", "emb",
                             R"("input_dim": 6, "output_dim": 3)", {"ids"}),
                  GraphLayer("Flatten", "flat_ids", "", {"emb"}),
                  GraphLayer("Concatenate", "cat", "", {"d", "flat_ids"}),
                  GraphDense("out", 3, "cat")},
                 "2"));
  Pair pair = MakePair(spec, LossKind::kSparseCrossEntropy);
  ASSERT_NE(pair.gpu, nullptr);
  ModelVariables vars = MakeVariables(spec, Init::kKeras, 3);
  Batch batch = RandomBatch(spec, 4, 5);
  batch.features[2 * 5 + 4] = 6;  // Example 2, second id: one past the table.
  const absl::Status status =
      pair.gpu
          ->TrainStep(InputOf(batch, 4, 0), vars.weight_map, &vars.gradient_map)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("input 1: "), std::string::npos) << status;
  EXPECT_NE(status.message().find("id 6 at position 5"), std::string::npos)
      << status;
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

// Dense -> Dense of `outputs` with `activation`: a softmax or sigmoid is
// read behind by the cross-entropies (logits); hard_sigmoid's output is
// read as probabilities (clipped) with from_logits=false.
std::string Head(int outputs, const std::string& activation) {
  return KerasModel(
      "5", {KerasLayer("Dense", R"("name": "dense", "units": 6,
                         "activation": "tanh")"),
            KerasLayer("Dense", absl::StrCat(R"("name": "out", "units": )",
                                             outputs, R"(, "activation": ")",
                                             activation, R"(")"))});
}

TEST(GpuBackend, EveryLossMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    LossKind loss;
    LossInput input;
    int outputs;
    const char* activation;
  };
  for (const Case& c : std::vector<Case>{
           {LossKind::kSparseCrossEntropy, LossInput::kProbabilities, 4,
            "hard_sigmoid"},
           {LossKind::kCategoricalCrossEntropy, LossInput::kLogits, 4,
            "softmax"},
           {LossKind::kCategoricalCrossEntropy, LossInput::kLogits, 4,
            "linear"},
           {LossKind::kCategoricalCrossEntropy, LossInput::kProbabilities, 4,
            "hard_sigmoid"},
           {LossKind::kBinaryCrossEntropy, LossInput::kLogits, 1, "sigmoid"},
           {LossKind::kBinaryCrossEntropy, LossInput::kLogits, 1, "linear"},
           {LossKind::kBinaryCrossEntropy, LossInput::kProbabilities, 1,
            "hard_sigmoid"},
           {LossKind::kMeanAbsoluteError, LossInput::kLogits, 4, "softmax"},
           {LossKind::kMeanAbsoluteError, LossInput::kLogits, 1, "linear"},
           {LossKind::kHuber, LossInput::kLogits, 4, "tanh"},
           {LossKind::kHuber, LossInput::kLogits, 1, "linear"}}) {
    CompareTraining(
        absl::StrCat(LossKindName(c.loss), " from ",
                     c.input == LossInput::kLogits ? "logits" : "probabilities",
                     ", ", c.outputs, " ", c.activation),
        MustParse(Head(c.outputs, c.activation)), c.loss, {9, 2}, 2, c.input);
  }
}

// Per-example scores (for AUC) and probabilities (for log loss), as the
// CPU fills them, for a binary model read from its logit or its clipped
// probability.
TEST(GpuBackend, ScoresAndProbabilitiesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [activation, input] :
       std::vector<std::pair<std::string, LossInput>>{
           {"sigmoid", LossInput::kLogits},
           {"hard_sigmoid", LossInput::kProbabilities}}) {
    SCOPED_TRACE(activation);
    const ModelSpec spec = MustParse(Head(1, activation));
    Pair pair = MakePair(spec, LossKind::kBinaryCrossEntropy, input);
    ASSERT_NE(pair.gpu, nullptr);
    ModelVariables vars = MakeVariables(spec, Init::kKeras, 3);
    const Batch batch = RandomBatch(spec, 7, 4);
    StepInput in = InputOf(batch, 7, 0);
    std::vector<float> cpu_scores(7), gpu_scores(7), cpu_p(7), gpu_p(7);
    in.scores = cpu_scores.data();
    in.probabilities = cpu_p.data();
    ASSERT_TRUE(pair.cpu->Evaluate(in, vars.weight_map).ok());
    in.scores = gpu_scores.data();
    in.probabilities = gpu_p.data();
    absl::StatusOr<StepResult> got = pair.gpu->Evaluate(in, vars.weight_map);
    ASSERT_TRUE(got.ok()) << got.status();
    for (int i = 0; i < 7; ++i) {
      EXPECT_NEAR(gpu_scores[i], cpu_scores[i],
                  1e-5 * std::max(1.0f, std::fabs(cpu_scores[i])));
      EXPECT_NEAR(gpu_p[i], cpu_p[i], 1e-6);
    }
  }
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
