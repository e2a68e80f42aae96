#include "parallel/tensor_parallel_plan.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "parallel/layout_map.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::Activation;
using worker::LayerKind;
using worker::LayerSpec;
using worker::ModelSpec;

ModelSpec SeedMlp() {
  absl::StatusOr<ModelSpec> spec =
      worker::LoadModel("examples/seed000_mlp.keras3.json", 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

absl::StatusOr<TensorParallelPlan> Plan(const ModelSpec& spec,
                                        const std::string& layout, int m,
                                        int member) {
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(layout);
  if (!map.ok()) return map.status();
  absl::StatusOr<VariableSplits> splits = map->Resolve(spec.variables, m);
  if (!splits.ok()) return splits.status();
  return PlanTensorParallel(spec, *splits, m, member);
}

int LayerIndex(const ModelSpec& spec, const std::string& name) {
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (spec.layers[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no layer " << name;
  return 0;
}

TEST(TensorParallelPlan, ColumnParallelD1GathersBeforeReplicatedD2) {
  const ModelSpec spec = SeedMlp();
  absl::StatusOr<TensorParallelPlan> plan = Plan(
      spec, R"({"d1/kernel": [null, "model"], "d1/bias": ["model"]})", 2, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ParallelLayer& d1 = plan->layers[LayerIndex(spec, "d1")];
  const ParallelLayer& dropout = plan->layers[LayerIndex(spec, "dropout")];
  const ParallelLayer& d2 = plan->layers[LayerIndex(spec, "d2")];
  EXPECT_EQ(d1.form, ParallelForm::kColumnParallel);
  EXPECT_TRUE(d1.output_split);
  EXPECT_FALSE(d1.reduce_input_gradient);  // nothing trainable before d1
  EXPECT_TRUE(dropout.input_split);
  EXPECT_TRUE(dropout.output_split);  // dropout acts on the split slice
  EXPECT_EQ(d2.form, ParallelForm::kReplicated);
  EXPECT_TRUE(d2.gather_input);
  EXPECT_FALSE(plan->gather_output);
  // Member 1 of 2 holds columns [100, 200) of d1/kernel, all of d2.
  const MemberVariable& kernel = plan->variables.at("d1/kernel");
  EXPECT_EQ(kernel.split_dim, 1);
  EXPECT_EQ(kernel.begin, 100);
  EXPECT_EQ(kernel.end, 200);
  EXPECT_EQ(kernel.local_shape, (std::vector<int64_t>{784, 100}));
  EXPECT_EQ(kernel.local_elements(), 78400);
  EXPECT_FALSE(plan->variables.at("d2/kernel").split());
  EXPECT_EQ(plan->variables.at("d2/kernel").local_shape,
            (std::vector<int64_t>{200, 10}));
  // One all-gather of d1's 200 columns forward; nothing backward.
  EXPECT_EQ(plan->forward_collectives, 1);
  EXPECT_EQ(plan->backward_collectives, 0);
  EXPECT_EQ(plan->floats_per_example, 200);
}

TEST(TensorParallelPlan, ColumnThenRowSkipsTheGatherBetweenThem) {
  const ModelSpec spec = SeedMlp();
  absl::StatusOr<TensorParallelPlan> plan = Plan(
      spec, R"({"d1/kernel": [null, "model"], "d2/kernel": ["model", null]})",
      2, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ParallelLayer& d2 = plan->layers[LayerIndex(spec, "d2")];
  EXPECT_EQ(d2.form, ParallelForm::kRowParallel);
  EXPECT_TRUE(d2.input_split);
  EXPECT_FALSE(d2.gather_input);
  EXPECT_FALSE(d2.slice_input);
  EXPECT_TRUE(d2.reduce_output);
  EXPECT_FALSE(d2.output_split);
  const MemberVariable& kernel = plan->variables.at("d2/kernel");
  EXPECT_EQ(kernel.begin, 0);
  EXPECT_EQ(kernel.end, 100);
  EXPECT_EQ(kernel.local_shape, (std::vector<int64_t>{100, 10}));
  EXPECT_FALSE(plan->variables.at("d2/bias").split());
  // The block's one all-reduce (of d2's 10 outputs).
  EXPECT_EQ(plan->forward_collectives, 1);
  EXPECT_EQ(plan->backward_collectives, 0);
  EXPECT_EQ(plan->floats_per_example, 10);
}

// A chain of Dense layers in -> units[0] -> units[1] ..., the last linear.
ModelSpec DenseChain(const std::vector<int64_t>& widths) {
  ModelSpec spec;
  spec.inputs.push_back({"input", {widths[0]}, DT_FLOAT});
  spec.input_shape = {widths[0]};
  for (size_t i = 1; i < widths.size(); ++i) {
    LayerSpec layer;
    layer.name = "d" + std::to_string(i);
    layer.kind = LayerKind::kDense;
    layer.inputs = {{/*model_input=*/i == 1, static_cast<int>(i) - 2}};
    if (i == 1) layer.inputs[0].index = 0;
    layer.input_shape = {widths[i - 1]};
    layer.input_shapes = {layer.input_shape};
    layer.output_shape = {widths[i]};
    layer.units = widths[i];
    layer.activation = Activation::kRelu;
    layer.variables = {layer.name + "/kernel", layer.name + "/bias"};
    for (int v = 0; v < 2; ++v) {
      VariableDef def;
      def.set_name(layer.variables[v]);
      if (v == 0) def.mutable_shape()->add_dims(widths[i - 1]);
      def.mutable_shape()->add_dims(widths[i]);
      spec.variables.push_back(def);
    }
    spec.layers.push_back(layer);
  }
  spec.outputs = {static_cast<int>(spec.layers.size()) - 1};
  spec.output_shape = {widths.back()};
  return spec;
}

TEST(TensorParallelPlan, BackwardCollectivesWhereInputGradientsAreNeeded) {
  const ModelSpec spec = DenseChain({8, 6, 4, 2});
  // d2 column-parallel after a trainable d1: its partial dx is summed. d3
  // replicated gathers d2's slices. Then a row-parallel layer on a whole
  // input slices it and gathers its dx.
  absl::StatusOr<TensorParallelPlan> plan = Plan(
      spec, R"({"d2/kernel": [null, "model"], "d2/bias": ["model"]})", 2, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->layers[1].reduce_input_gradient);
  EXPECT_TRUE(plan->layers[2].gather_input);
  EXPECT_EQ(plan->forward_collectives, 1);
  EXPECT_EQ(plan->backward_collectives, 1);
  EXPECT_EQ(plan->floats_per_example, 4 + 6);

  absl::StatusOr<TensorParallelPlan> row =
      Plan(spec, R"({"d2/kernel": ["model", null]})", 2, 1);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_TRUE(row->layers[1].slice_input);
  EXPECT_TRUE(row->layers[1].reduce_output);
  EXPECT_EQ(row->variables.at("d2/kernel").begin, 3);
  EXPECT_EQ(row->backward_collectives, 1);  // d1 needs d2's whole dx

  absl::StatusOr<TensorParallelPlan> last =
      Plan(spec, R"({"d3/kernel": [null, "model"], "d3/bias": ["model"]})", 2,
           0);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(last->gather_output);
}

void ExpectRefused(const ModelSpec& spec, const std::string& layout, int m,
                   const std::string& words) {
  absl::StatusOr<TensorParallelPlan> plan = Plan(spec, layout, m, 0);
  ASSERT_FALSE(plan.ok()) << layout;
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find(words), std::string::npos)
      << plan.status();
}

TEST(TensorParallelPlan, RefusesWhatItCannotSplitNamingLayerAndReason) {
  const ModelSpec mlp = SeedMlp();
  ExpectRefused(mlp, R"({"d2/kernel": [null, "model"], "d2/bias": ["model"]})",
                2, "layer 'd2': kernel 'd2/kernel' is split on its output "
                   "dimension, but the layer's softmax needs the whole output");
  ExpectRefused(mlp, R"({"d2/kernel": ["model", null], "d2/bias": ["model"]})",
                2, "layer 'd2': kernel 'd2/kernel' is split on its input "
                   "dimension (row-parallel), so bias 'd2/bias' must be "
                   "replicated");
  ExpectRefused(mlp, R"({"d2/bias": ["model"]})", 2,
                "layer 'd2': bias 'd2/bias' is split but kernel 'd2/kernel' "
                "is not");
  const ModelSpec chain = DenseChain({8, 6, 4});
  ExpectRefused(chain, R"({"d1/kernel": [null, "model"]})", 2,
                "layer 'd1': kernel 'd1/kernel' is split on its output "
                "dimension (column-parallel), so bias 'd1/bias' must be split");

  ModelSpec conv = DenseChain({8, 6});
  conv.layers[0].kind = LayerKind::kConv2D;
  ExpectRefused(conv, R"({"d1/kernel": [null, "model"]})", 2,
                "layer 'd1': variable 'd1/kernel' is split, but this version "
                "splits only Dense layers");

  ModelSpec rank3 = DenseChain({8, 6});
  rank3.layers[0].input_shape = {2, 4};
  ExpectRefused(rank3, R"({"d1/kernel": ["model", null]})", 2,
                "reads an input of rank 2 per example");

  ModelSpec branch = DenseChain({8, 6, 4, 2});
  branch.layers[2].inputs[0].index = 0;  // d3 reads d1, not d2
  ExpectRefused(branch, R"({"d1/kernel": ["model", null]})", 2,
                "layer 'd3': does not read the layer before it");
  // Nothing split: any graph is planned as replicated.
  absl::StatusOr<TensorParallelPlan> replicated = Plan(branch, "{}", 2, 0);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ(replicated->forward_collectives, 0);
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
