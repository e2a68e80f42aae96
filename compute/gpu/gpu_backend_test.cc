// GpuBackend against CpuBackend on the same model, weights and batch
// (gpu_backend_test_util.h says what is compared and to what tolerance):
// the two shipped models, the examples, small models covering the original
// layers, every loss (from logits and probabilities), per-example scores
// and probabilities, odd, empty and changing batch sizes, and bad inputs.
// The Functional graphs and every layer kind are gpu_backend_graph_test's.
//
// Without a GPU every test that needs one skips, printing why.
#include "compute/gpu/gpu_backend.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compute/cpu/model_test_util.h"
#include "compute/gpu/gpu_backend_test_util.h"
#include "gtest/gtest.h"
#include "model/dynamic_embeddings.h"

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
using gpu_test::Batch;
using gpu_test::CompareGraph;
using gpu_test::CompareTraining;
using gpu_test::HaveGpu;
using gpu_test::Head;
using gpu_test::InputOf;
using gpu_test::Join;
using gpu_test::MakePair;
using gpu_test::Pair;
using gpu_test::RandomBatch;

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

// Every example: a Functional MLP (both JSON forms), a ResNet with
// BatchNormalization, a Transformer encoder (LayerNormalization,
// MultiHeadAttention), two-input models. wide_deep's Embeddings are
// growing tables (input_dim 0): as a worker does, the backends compute on
// their local mirrors of the rows a batch can name (WithLocalTables).
TEST(GpuBackend, ExamplesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* example :
       {"examples/seed000_mlp.keras3.json", "examples/seed000_mlp.keras2.json",
        "examples/two_input.keras3.json", "examples/wide_deep.keras3.json",
        "examples/resnet_small.keras3.json",
        "examples/transformer.keras3.json"}) {
    absl::StatusOr<ModelSpec> loaded = LoadModel(example, 42);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const ModelSpec spec = WithLocalTables(*loaded, 16);
    const LossKind loss = spec.output_shape[0] == 1
                              ? LossKind::kMeanSquaredError
                              : LossKind::kSparseCrossEntropy;
    CompareTraining(example, spec, loss, {16, 3}, 2);
  }
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
