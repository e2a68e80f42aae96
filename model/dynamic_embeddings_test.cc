#include "model/dynamic_embeddings.h"

#include <string>

#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {
namespace {

// A Sequential model: 3 ids -> Embedding(input_dim, 4) -> Flatten -> Dense(1).
std::string Model(int input_dim) {
  return std::string(R"({"class_name": "Sequential", "config": {"name": "m",
    "layers": [
      {"class_name": "InputLayer",
       "config": {"batch_shape": [null, 3], "dtype": "int32", "name": "in"}},
      {"class_name": "Embedding", "config": {"name": "emb", "input_dim": )") +
         std::to_string(input_dim) + R"(, "output_dim": 4}},
      {"class_name": "Flatten", "config": {"name": "flat"}},
      {"class_name": "Dense", "config": {"name": "out", "units": 1,
       "activation": "sigmoid"}}]}})";
}

const VariableDef& Table(const ModelSpec& spec) {
  for (const VariableDef& def : spec.variables) {
    if (def.name() == "emb/embeddings") return def;
  }
  static const VariableDef none;
  return none;
}

TEST(DynamicEmbeddings, InputDimZeroIsAGrowingTable) {
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(Model(0), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const VariableDef& table = Table(*spec);
  EXPECT_TRUE(IsGrowingTable(table));
  EXPECT_EQ(table.shape().dims(0), 0);
  EXPECT_EQ(table.shape().dims(1), 4);
}

TEST(DynamicEmbeddings, NamedLayerBecomesGrowing) {
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(Model(20), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(IsGrowingTable(Table(*spec)));
  ASSERT_TRUE(MakeEmbeddingsDynamic({"emb"}, &*spec).ok());
  EXPECT_TRUE(IsGrowingTable(Table(*spec)));
}

TEST(DynamicEmbeddings, UnknownOrWrongLayerIsRefusedByName) {
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(Model(20), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::Status missing = MakeEmbeddingsDynamic({"nope"}, &*spec);
  EXPECT_TRUE(absl::IsInvalidArgument(missing));
  EXPECT_NE(missing.message().find("'nope'"), std::string::npos) << missing;
  absl::Status dense = MakeEmbeddingsDynamic({"out"}, &*spec);
  EXPECT_TRUE(absl::IsInvalidArgument(dense));
  EXPECT_NE(dense.message().find("not an Embedding"), std::string::npos)
      << dense;
}

TEST(DynamicEmbeddings, LoadRunModelAppliesTheConfig) {
  TrainingConfig config;
  config.set_model_json(Model(20));
  config.add_dynamic_embeddings("emb");
  absl::StatusOr<ModelSpec> spec = LoadRunModel(config);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(IsGrowingTable(Table(*spec)));
}

TEST(DynamicEmbeddings, LocalTablesHoldEveryIdABatchCanName) {
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(Model(0), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(IdsPerExample(*spec, "emb/embeddings"), 3);
  // 8 examples of 3 ids: at most 24 distinct ones.
  const ModelSpec local = WithLocalTables(*spec, 8);
  EXPECT_EQ(Table(local).shape().dims(0), 24);
  EXPECT_EQ(Table(local).shape().dims(1), 4);
  for (const LayerSpec& layer : local.layers) {
    if (layer.name == "emb") EXPECT_EQ(layer.input_dim, 24);
  }
  // The original is untouched; fixed tables keep their size.
  EXPECT_EQ(Table(*spec).shape().dims(0), 0);
  absl::StatusOr<ModelSpec> fixed = ParseKerasModel(Model(20), 1);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(Table(WithLocalTables(*fixed, 8)).shape().dims(0), 20);
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
