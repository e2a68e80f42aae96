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
                "splits only Dense, MultiHeadAttention and Embedding layers");

  // d2 adds d1's split output to itself: a layer of two inputs.
  ModelSpec merge = DenseChain({8, 6, 6, 2});
  merge.layers[1].kind = LayerKind::kMerge;
  merge.layers[1].inputs = {{false, 0}, {false, 0}};
  merge.layers[1].input_shapes = {{6}, {6}};
  merge.layers[1].variables.clear();
  ExpectRefused(merge,
                R"({"d1/kernel": [null, "model"], "d1/bias": ["model"]})", 2,
                "layer 'd2': reads a split activation among several "
                "inputs");

  // A Flatten of a split [2, 4] activation.
  ModelSpec flatten = DenseChain({8, 8, 4});
  flatten.layers[0].input_shape = {2, 8};
  flatten.layers[0].input_shapes = {{2, 8}};
  flatten.layers[0].output_shape = {2, 8};
  flatten.layers[1].kind = LayerKind::kFlatten;
  flatten.layers[1].input_shape = {2, 8};
  flatten.layers[1].input_shapes = {{2, 8}};
  flatten.layers[1].output_shape = {16};
  flatten.layers[1].variables.clear();
  ExpectRefused(flatten,
                R"({"d1/kernel": [null, "model"], "d1/bias": ["model"]})", 2,
                "layer 'd2': reshapes a split activation of rank above 1");

  // A branch (d3 reads d1, as a residual would) is planned.
  ModelSpec branch = DenseChain({8, 6, 4, 2});
  branch.layers[2].inputs[0].index = 0;  // d3 reads d1, not d2
  branch.layers[2].input_shape = {6};
  branch.layers[2].input_shapes = {{6}};
  absl::StatusOr<TensorParallelPlan> branched =
      Plan(branch, R"({"d1/kernel": ["model", null]})", 2, 0);
  ASSERT_TRUE(branched.ok()) << branched.status();
  EXPECT_TRUE(branched->layers[0].slice_input);
  // Nothing split: any graph is planned as replicated.
  absl::StatusOr<TensorParallelPlan> replicated = Plan(branch, "{}", 2, 0);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ(replicated->forward_collectives, 0);
}

ModelSpec Transformer() {
  absl::StatusOr<ModelSpec> spec =
      worker::LoadModel("examples/transformer_tp.keras3.json", 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

constexpr char kTransformerLayout[] = R"({
  "embedding/embeddings": ["model", null],
  "attention/(query|key|value)/kernel": [null, "model", null],
  "attention/(query|key|value)/bias": ["model", null],
  "attention/attention_output/kernel": ["model", null, null],
  "ffn_hidden/kernel": [null, "model"], "ffn_hidden/bias": ["model"],
  "ffn_output/kernel": ["model", null]})";

TEST(TensorParallelPlan, TransformerSplitsEmbeddingAttentionAndMlp) {
  const ModelSpec spec = Transformer();
  absl::StatusOr<TensorParallelPlan> plan =
      Plan(spec, kTransformerLayout, 2, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto layer = [&](const std::string& name) {
    return plan->layers[LayerIndex(spec, name)];
  };
  EXPECT_EQ(layer("embedding").form, ParallelForm::kVocabParallel);
  EXPECT_TRUE(layer("embedding").reduce_output);
  EXPECT_EQ(layer("attention").form, ParallelForm::kHeadParallel);
  EXPECT_TRUE(layer("attention").reduce_output);
  EXPECT_TRUE(layer("attention").reduce_input_gradient);
  EXPECT_FALSE(layer("attention_dropout").output_split);  // after the sum
  EXPECT_EQ(layer("ffn_hidden").form, ParallelForm::kColumnParallel);
  EXPECT_FALSE(layer("ffn_hidden").gather_input);
  EXPECT_TRUE(layer("ffn_dropout").output_split);
  EXPECT_EQ(layer("ffn_output").form, ParallelForm::kRowParallel);
  EXPECT_FALSE(layer("ffn_output").slice_input);  // no exchange in between
  EXPECT_EQ(layer("attention_norm").form, ParallelForm::kReplicated);
  EXPECT_FALSE(plan->gather_output);
  // Forward: the embedding's, the attention's and the MLP's all-reduces.
  EXPECT_EQ(plan->forward_collectives, 3);
  const MemberVariable& table = plan->variables.at("embedding/embeddings");
  EXPECT_EQ(table.begin, 128);
  EXPECT_EQ(table.end, 256);
  EXPECT_EQ(plan->variables.at("attention/query/kernel").local_shape,
            (std::vector<int64_t>{32, 2, 8}));
  EXPECT_EQ(plan->variables.at("attention/attention_output/kernel").local_shape,
            (std::vector<int64_t>{2, 8, 32}));
  EXPECT_FALSE(plan->variables.at("attention/attention_output/bias").split());
}

TEST(TensorParallelPlan, RefusesAttentionAndEmbeddingSplitsItCannotRun) {
  const ModelSpec spec = Transformer();
  ExpectRefused(spec, R"({"attention/query/kernel": [null, "model", null]})", 2,
                "layer 'attention': variable 'attention/query/bias' is "
                "replicated, but MultiHeadAttention splits by heads");
  ExpectRefused(spec, R"({"attention/.*/kernel": [null, null, "model"]})", 2,
                "variable 'attention/query/kernel' is split on dimension 2");
  ExpectRefused(spec, R"({"embedding/embeddings": [null, "model"]})", 2,
                "layer 'embedding': embeddings 'embedding/embeddings' are "
                "split on their output dimension");
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
