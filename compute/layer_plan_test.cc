#include "compute/layer_plan.h"

#include <string>
#include <vector>

#include "compute/rng_tracker.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"

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

// Functional models for the graph tests: x [4] and y [4], Dense layers of
// 4 units each reading one tensor, an Add of two, the output "c".
std::string Functional(const std::vector<std::string>& layers,
                       const std::string& inputs) {
  std::string json = R"({"class_name": "Model", "config": {"layers": [)";
  for (size_t i = 0; i < layers.size(); ++i) {
    json += (i > 0 ? ", " : "") + layers[i];
  }
  return json + R"(], "input_layers": [)" + inputs +
         R"(], "output_layers": [["c", 0, 0]]}})";
}

std::string InputLayer(const std::string& name) {
  return R"({"class_name": "InputLayer", "name": ")" + name +
         R"(", "inbound_nodes": [], "config": {"name": ")" + name +
         R"(", "batch_input_shape": [null, 4]}})";
}

std::string Called(const std::string& class_name, const std::string& name,
                   const std::string& config,
                   const std::vector<std::string>& reads) {
  std::string node;
  for (const std::string& source : reads) {
    node += (node.empty() ? "" : ", ") + ("[\"" + source + "\", 0, 0, {}]");
  }
  return R"({"class_name": ")" + class_name + R"(", "name": ")" + name +
         R"(", "config": {"name": ")" + name + "\"" + config +
         R"(}, "inbound_nodes": [[)" + node + "]]}";
}

std::string Dense(const std::string& name, const std::string& reads) {
  return Called("Dense", name, R"(, "units": 4)", {reads});
}

ModelSpec Parse(const std::string& json) {
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(json, 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

// Stages read earlier stages or model inputs; a merge reads both branches;
// input gradients are wanted only where something before is trainable.
TEST(LayerPlan, PlansAGraphWithABranchAndAMerge) {
  // x -> a -> b -+-> add -> c ; a -> relu -+
  const ModelSpec spec = Parse(
      Functional({InputLayer("x"), Dense("a", "x"), Dense("b", "a"),
                  Called("Activation", "r", R"(, "activation": "relu")", {"a"}),
                  Called("Add", "add", "", {"b", "r"}), Dense("c", "add")},
                 R"(["x", 0, 0])"));
  const RngTracker rng(1, 0);
  absl::StatusOr<LayerPlan> plan = PlanLayers(spec, LayerPlanOptions(), rng);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kinds(*plan), (std::vector<K>{K::kDense, K::kDense, K::kRelu,
                                          K::kMerge, K::kDense}));
  const auto& s = plan->stages;
  EXPECT_TRUE(s[0].inputs[0].model_input);
  EXPECT_FALSE(s[0].needs_dx);
  EXPECT_EQ(s[2].inputs[0], (TensorRef{false, 0}));  // relu reads a.
  EXPECT_FALSE(s[2].in_place);                       // a is read by b too.
  EXPECT_EQ(s[3].inputs,
            (std::vector<TensorRef>{TensorRef{false, 1}, TensorRef{false, 2}}));
  EXPECT_EQ(s[3].input_needs_dx, (std::vector<bool>{true, true}));
  EXPECT_EQ(plan->output, 4);
  EXPECT_EQ(plan->output_size, 4);
}

// DepthwiseConv2D is a grouped convolution and Conv1D one of height 1;
// both carry their dilation and padding into the op's shape.
TEST(LayerPlan, PlansDepthwiseAndOneDimensionalConvolutions) {
  const ModelSpec spec = Parse(R"({"class_name": "Sequential", "config": {
      "name": "s", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in",
        "batch_input_shape": [null, 6, 4, 3]}},
      {"class_name": "DepthwiseConv2D", "config": {"name": "dw",
        "kernel_size": 3, "depth_multiplier": 2, "dilation_rate": 2,
        "padding": "same", "activation": "relu",
        "depthwise_regularizer": {"class_name": "L1", "config": {"l1": 0.1}}}},
      {"class_name": "Reshape", "config": {"name": "r",
        "target_shape": [24, 6]}},
      {"class_name": "Conv1D", "config": {"name": "c", "filters": 2,
        "kernel_size": 3, "padding": "causal", "dilation_rate": 2,
        "bias_regularizer": {"class_name": "L2", "config": {"l2": 0.2}}}},
      {"class_name": "Flatten", "config": {"name": "f"}},
      {"class_name": "Dense", "config": {"name": "d", "units": 2,
        "kernel_regularizer": {"class_name": "L1L2",
                               "config": {"l1": 0.3, "l2": 0.4}}}}]}})");
  const RngTracker rng(1, 0);
  absl::StatusOr<LayerPlan> plan = PlanLayers(spec, LayerPlanOptions(), rng);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kinds(*plan),
            (std::vector<K>{K::kConv2D, K::kRelu, K::kConv2D, K::kDense}));
  const cpu::Conv2DShape& dw = plan->stages[0].conv;
  EXPECT_EQ(dw.groups, 3);
  EXPECT_EQ(dw.in_channels, 3);
  EXPECT_EQ(dw.out_channels, 6);
  EXPECT_EQ(dw.dilation_h, 2);
  EXPECT_EQ(dw.dilation_w, 2);
  EXPECT_EQ(dw.padding, cpu::Padding::kSame);
  const cpu::Conv2DShape& c = plan->stages[2].conv;
  EXPECT_EQ(c.groups, 1);
  EXPECT_EQ(c.height, 1);
  EXPECT_EQ(c.width, 24);
  EXPECT_EQ(c.in_channels, 6);
  EXPECT_EQ(c.kernel_h, 1);
  EXPECT_EQ(c.kernel_w, 3);
  EXPECT_EQ(c.dilation_w, 2);
  EXPECT_EQ(c.padding, cpu::Padding::kCausal);
  EXPECT_EQ(plan->stages[2].out_size, 48);

  // Variables: dw/depthwise_kernel, dw/bias, c/kernel, c/bias, d/kernel,
  // d/bias.
  const std::vector<RegularizedVariable> regularized =
      RegularizedVariables(spec);
  ASSERT_EQ(regularized.size(), 3u);
  EXPECT_EQ(regularized[0].variable, 0);
  EXPECT_EQ(regularized[0].regularizer.l1, 0.1f);
  EXPECT_EQ(regularized[1].variable, 3);
  EXPECT_EQ(regularized[1].regularizer.l2, 0.2f);
  EXPECT_EQ(regularized[2].variable, 4);
  EXPECT_EQ(regularized[2].regularizer.l1, 0.3f);
  EXPECT_EQ(regularized[2].regularizer.l2, 0.4f);
}

// A layer nothing reads is refused, naming it.
TEST(LayerPlan, RefusesALayerThatDoesNotLeadToTheOutput) {
  const RngTracker rng(1, 0);
  EXPECT_EQ(PlanLayers(Parse(Functional({InputLayer("x"), InputLayer("y"),
                                         Dense("a", "x"), Dense("c", "y")},
                                        R"(["x", 0, 0], ["y", 0, 0])")),
                       LayerPlanOptions(), rng)
                .status()
                .message(),
            "layer 'a' does not lead to the model's output");
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
