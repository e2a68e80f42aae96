#include "chief/model_summary.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace chief {
namespace {

VariableDef Variable(const std::string& name, std::vector<int64_t> dims,
                     bool moving_average = false) {
  VariableDef def;
  def.set_name(name);
  for (int64_t d : dims) def.mutable_shape()->add_dims(d);
  if (moving_average) def.mutable_moving_average()->set_momentum(0.99f);
  return def;
}

TEST(ModelSummary, KerasLikeTableWithParameterCounts) {
  worker::ModelSpec spec;
  spec.name = "sequential";
  worker::LayerSpec dense;
  dense.name = "dense";
  dense.kind = worker::LayerKind::kDense;
  dense.output_shape = {1000};
  dense.variables = {"dense/kernel", "dense/bias"};
  worker::LayerSpec norm;
  norm.name = "batch_normalization";
  norm.kind = worker::LayerKind::kBatchNormalization;
  norm.output_shape = {1000};
  norm.variables = {"batch_normalization/gamma",
                    "batch_normalization/moving_mean"};
  worker::LayerSpec again = dense;  // a second call of the same layer
  again.shares = 0;
  spec.layers = {dense, norm, again};
  spec.variables = {Variable("dense/kernel", {1000, 1000}),
                    Variable("dense/bias", {1000}),
                    Variable("batch_normalization/gamma", {1000}),
                    Variable("batch_normalization/moving_mean", {1000},
                             /*moving_average=*/true)};
  EXPECT_EQ(ModelSummary(spec),
            "Model: \"sequential\"\n\n"
            "| Layer (type) | Output Shape | Param # |\n|---|---|---:|\n"
            "| dense (Dense) | (None, 1000) | 1,001,000 |\n"
            "| batch_normalization (BatchNormalization) | (None, 1000) | "
            "2,000 |\n"
            "| dense (Dense) | (None, 1000) | 0 |\n"
            "\nTotal params: 1,003,000  \nTrainable params: 1,002,000  \n"
            "Non-trainable params: 1,000\n");
}

TEST(ModelSummary, ShippedCnnListsEveryLayer) {
  absl::StatusOr<worker::ModelSpec> spec = worker::LoadModel("cnn", 42);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string summary = ModelSummary(*spec);
  for (const worker::LayerSpec& layer : spec->layers) {
    EXPECT_TRUE(absl::StrContains(
        summary,
        absl::StrCat("| ", layer.name, " (", LayerTypeName(layer), ") |")))
        << layer.name << "\n"
        << summary;
  }
  EXPECT_TRUE(absl::StrContains(summary, "(Conv2D)")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "(Dense)")) << summary;
}

// The three convolutions share LayerKind::kConv2D; the summary names
// each by its Keras class.
TEST(ModelSummary, NamesDepthwiseAndOneDimensionalConvolutions) {
  worker::LayerSpec conv;
  conv.kind = worker::LayerKind::kConv2D;
  conv.input_shape = {8, 8, 3};
  EXPECT_EQ(LayerTypeName(conv), "Conv2D");
  worker::LayerSpec depthwise = conv;
  depthwise.depthwise = true;
  depthwise.groups = 3;
  EXPECT_EQ(LayerTypeName(depthwise), "DepthwiseConv2D");
  worker::LayerSpec one_d = conv;
  one_d.input_shape = {8, 3};
  EXPECT_EQ(LayerTypeName(one_d), "Conv1D");
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
