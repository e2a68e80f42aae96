#include "parallel/member_model.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "parallel/layout_map.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::ModelSpec;

const worker::LayerSpec& Layer(const ModelSpec& spec, const std::string& name) {
  for (const worker::LayerSpec& layer : spec.layers) {
    if (layer.name == name) return layer;
  }
  ADD_FAILURE() << "no layer " << name;
  return spec.layers[0];
}

std::vector<int64_t> Shape(const ModelSpec& spec, const std::string& name) {
  for (const VariableDef& def : spec.variables) {
    if (def.name() == name) {
      return {def.shape().dims().begin(), def.shape().dims().end()};
    }
  }
  ADD_FAILURE() << "no variable " << name;
  return {};
}

TEST(MemberModelSpec, TheTransformersPartsInTheShapesTheOpsSee) {
  absl::StatusOr<ModelSpec> spec =
      worker::LoadModel("examples/transformer_tp.keras3.json", 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::string> text =
      ReadLayoutMapFile("examples/transformer_tp.layout.json");
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(*text);
  ASSERT_TRUE(map.ok()) << map.status();
  absl::StatusOr<VariableSplits> splits = map->Resolve(spec->variables, 4);
  ASSERT_TRUE(splits.ok()) << splits.status();
  absl::StatusOr<TensorParallelPlan> plan =
      PlanTensorParallel(*spec, *splits, 4, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<ModelSpec> local = MemberModelSpec(*spec, *plan);
  ASSERT_TRUE(local.ok()) << local.status();

  EXPECT_EQ(Layer(*local, "embedding").input_dim, 64);
  EXPECT_EQ(Layer(*local, "embedding").output_shape,
            (std::vector<int64_t>{8, 32}));  // whole after the sum
  EXPECT_EQ(Layer(*local, "attention").num_heads, 1);
  EXPECT_EQ(Layer(*local, "ffn_hidden").units, 16);
  EXPECT_EQ(Layer(*local, "ffn_hidden").output_shape,
            (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(Layer(*local, "ffn_dropout").input_shape,
            (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(Layer(*local, "ffn_output").input_shape,
            (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(Layer(*local, "ffn_output").output_shape,
            (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(Layer(*local, "attention_norm").input_shape,
            Layer(*spec, "attention_norm").input_shape);
  EXPECT_EQ(Shape(*local, "embedding/embeddings"),
            (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(Shape(*local, "attention/value/bias"),
            (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(Shape(*local, "attention/attention_output/bias"),
            (std::vector<int64_t>{32}));
  EXPECT_EQ(Shape(*local, "ffn_output/kernel"), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(local->output_shape, spec->output_shape);

  // A plan of another model is refused.
  TensorParallelPlan other = *plan;
  other.layers.pop_back();
  EXPECT_EQ(MemberModelSpec(*spec, other).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
