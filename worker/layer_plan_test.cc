#include "worker/layer_plan.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/model/keras_model.h"
#include "worker/rng_tracker.h"

namespace pstrain {
namespace worker {
namespace {

ModelSpec Load(const std::string& name) {
  absl::StatusOr<ModelSpec> spec = LoadModel(name, 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

std::vector<StageKind> Kinds(const LayerPlan& plan) {
  std::vector<StageKind> kinds;
  for (const StagePlan& stage : plan.stages) kinds.push_back(stage.kind);
  return kinds;
}

using K = StageKind;

TEST(LayerPlan, TheCnnWithAndWithoutFusedConvolutionReLUs) {
  const ModelSpec spec = Load("cnn");
  const RngTracker rng(1, 0);
  LayerPlanOptions options;
  options.fuse_conv_relu = true;
  absl::StatusOr<LayerPlan> fused = PlanLayers(spec, options, rng);
  ASSERT_TRUE(fused.ok()) << fused.status();
  // Conv, pool, conv, pool, (flatten: none), dense + relu, dense (logits:
  // its softmax, if any, left out).
  EXPECT_EQ(Kinds(*fused),
            (std::vector<K>{K::kConv2D, K::kMaxPool2D, K::kConv2D,
                            K::kMaxPool2D, K::kDense, K::kRelu, K::kDense}));
  EXPECT_TRUE(fused->stages[0].conv.fuse_relu);
  EXPECT_FALSE(fused->stages[0].needs_dx);  // The first trainable stage.
  EXPECT_FALSE(fused->stages[0].conv.compute_dx);
  EXPECT_TRUE(fused->stages[2].conv.compute_dx);
  EXPECT_TRUE(fused->stages[5].in_place);
  EXPECT_EQ(fused->first_trainable, 0);
  EXPECT_EQ(fused->output_size, 10);
  EXPECT_EQ(fused->stages[0].conv.height, 28);
  EXPECT_EQ(fused->stages[0].conv.out_channels, 32);

  options.fuse_conv_relu = false;
  absl::StatusOr<LayerPlan> separate = PlanLayers(spec, options, rng);
  ASSERT_TRUE(separate.ok()) << separate.status();
  EXPECT_EQ(
      Kinds(*separate),
      (std::vector<K>{K::kConv2D, K::kRelu, K::kMaxPool2D, K::kConv2D, K::kRelu,
                      K::kMaxPool2D, K::kDense, K::kRelu, K::kDense}));
  EXPECT_FALSE(separate->stages[0].conv.fuse_relu);
  EXPECT_TRUE(separate->stages[1].in_place);
  EXPECT_TRUE(separate->stages[1].needs_dx);
}

TEST(LayerPlan, TheMlpKeepsItsFinalSoftmaxOnlyWhenAsked) {
  const ModelSpec spec = Load("mlp");
  const RngTracker rng(7, 0);
  LayerPlanOptions options;
  absl::StatusOr<LayerPlan> logits = PlanLayers(spec, options, rng);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(Kinds(*logits),
            (std::vector<K>{K::kDense, K::kRelu, K::kDropout, K::kDense}));
  const StagePlan& dropout = logits->stages[2];
  EXPECT_FLOAT_EQ(dropout.dropout_rate, 0.4f);
  EXPECT_EQ(dropout.dropout_seed, rng.GlobalSeed(dropout.layer));
  EXPECT_EQ(dropout.in_size, 200);

  options.drop_final_softmax = false;
  absl::StatusOr<LayerPlan> probabilities = PlanLayers(spec, options, rng);
  ASSERT_TRUE(probabilities.ok()) << probabilities.status();
  ASSERT_EQ(probabilities->stages.size(), 5u);
  const StagePlan& softmax = probabilities->stages.back();
  EXPECT_EQ(softmax.kind, K::kSoftmax);
  EXPECT_EQ(softmax.softmax.batch, 1);
  EXPECT_EQ(softmax.softmax.classes, 10);
  EXPECT_FALSE(softmax.in_place);
}

TEST(LayerPlan, AnEmbeddingAfterTheFirstLayerIsRefusedNamingIt) {
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(
      R"({"class_name": "Sequential", "config": {"name": "m", "layers": [
          {"class_name": "InputLayer", "config": {"name": "input",
           "batch_input_shape": [null, 4]}},
          {"class_name": "Dense", "config": {"name": "dense", "units": 4}},
          {"class_name": "Embedding", "config": {"name": "late",
           "input_dim": 5, "output_dim": 2}}]}})",
      1);
  if (!spec.ok()) {
    // The parser may refuse it first; then it names the layer too.
    EXPECT_NE(spec.status().message().find("late"), std::string::npos)
        << spec.status();
    return;
  }
  absl::StatusOr<LayerPlan> plan =
      PlanLayers(*spec, LayerPlanOptions(), RngTracker(1, 0));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("layer 'late'"), std::string::npos)
      << plan.status();
}

// A Functional model whose layers are not one chain is parsed, then refused
// by the planner naming the layer where the chain breaks.
TEST(LayerPlan, RefusesGraphsThatAreNotAChain) {
  const auto functional = [](const std::string& layers,
                             const std::string& inputs) {
    return R"({"class_name": "Model", "config": {"layers": [)" + layers +
           R"(], "input_layers": [)" + inputs +
           R"(], "output_layers": [["c", 0, 0]]}})";
  };
  const std::string x =
      R"({"class_name": "InputLayer", "name": "x", "inbound_nodes": [],
          "config": {"name": "x", "batch_input_shape": [null, 4]}})";
  const auto dense = [](const std::string& name, const std::string& reads) {
    return R"({"class_name": "Dense", "name": ")" + name +
           R"(", "config": {"name": ")" + name +
           R"(", "units": 4}, "inbound_nodes": [[[")" + reads +
           R"(", 0, 0, {}]]]})";
  };
  const RngTracker rng(1, 0);
  const auto refusal = [&](const std::string& json) {
    absl::StatusOr<ModelSpec> spec = ParseKerasModel(json, 1);
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (!spec.ok()) return std::string();
    absl::StatusOr<LayerPlan> plan = PlanLayers(*spec, LayerPlanOptions(), rng);
    EXPECT_FALSE(plan.ok());
    return std::string(plan.status().message());
  };
  constexpr char kOnly[] =
      ": only models whose layers form a chain are computed yet (no "
      "branches, merges, several inputs or shared layers)";
  // b reads x, not a.
  EXPECT_EQ(refusal(functional(x + "," + dense("a", "x") + "," +
                                   dense("b", "x") + "," + dense("c", "b"),
                               R"(["x", 0, 0])")),
            std::string("layer 'b' does not read layer 'a'") + kOnly);
  // c, the output, is not the last layer.
  EXPECT_EQ(refusal(functional(x + "," + dense("a", "x") + "," +
                                   dense("c", "a") + "," + dense("d", "c"),
                               R"(["x", 0, 0])")),
            std::string("the model's output is not its last layer") + kOnly);
  const std::string y =
      R"({"class_name": "InputLayer", "name": "y", "inbound_nodes": [],
          "config": {"name": "y", "batch_input_shape": [null, 4]}})";
  EXPECT_EQ(refusal(functional(x + "," + y + "," + dense("a", "x") + "," +
                                   dense("c", "y"),
                               R"(["x", 0, 0], ["y", 0, 0])")),
            std::string("the model has 2 inputs") + kOnly);
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
