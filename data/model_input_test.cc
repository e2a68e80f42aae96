#include "data/model_input.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace {

using ::testing::HasSubstr;

ModelSpec Parse(const char* json) { return ParseKerasModel(json, 1).value(); }

// Embedding(50, 8) over 2 ids per example.
ModelSpec EmbeddingModel() {
  return Parse(R"({"class_name": "Sequential", "config": {
    "name": "ids", "layers": [
      {"class_name": "Embedding", "config": {"name": "embedding",
        "batch_input_shape": [null, 2], "input_dim": 50, "output_dim": 8}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})");
}

ModelSpec DenseModel() {
  return Parse(R"({"class_name": "Sequential", "config": {
    "name": "floats", "layers": [{"class_name": "Dense", "config": {
      "name": "dense", "units": 2, "batch_input_shape": [null, 2]}}]}})");
}

data::Dataset Floats(std::vector<float> values, int64_t columns) {
  data::Dataset d;
  const int64_t rows = values.size() / columns;
  d.features = Tensor::Create(DT_FLOAT, {rows, columns}).value();
  std::copy(values.begin(), values.end(), d.features.data<float>());
  d.labels.assign(rows, 0);
  d.num_classes = 2;
  d.origin.path = "train.csv";
  for (int64_t i = 0; i < rows; ++i) d.origin.lines.push_back(i + 1);
  for (int64_t c = 0; c < columns; ++c) d.origin.feature_columns.push_back(c + 1);
  return d;
}

TEST(FitDatasetToModel, EmbeddingModelGetsInt32Ids) {
  data::Dataset d = Floats({0, 49, 3, 4}, 2);
  ASSERT_TRUE(FitDatasetToModel(EmbeddingModel(), &d).ok());
  ASSERT_EQ(d.features.dtype(), DT_INT32);
  EXPECT_EQ(d.features.data<int32_t>()[1], 49);
}

TEST(FitDatasetToModel, GrowingTableTakesAnyNonNegativeId) {
  // Embedding(0, 8): a growing table, ids beyond any input_dim.
  const ModelSpec spec = Parse(R"({"class_name": "Sequential", "config": {
    "name": "ids", "layers": [
      {"class_name": "Embedding", "config": {"name": "embedding",
        "batch_input_shape": [null, 2], "input_dim": 0, "output_dim": 8}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})");
  data::Dataset d = Floats({0, 1000000, 3, 70000}, 2);
  ASSERT_TRUE(FitDatasetToModel(spec, &d).ok());
  ASSERT_EQ(d.features.dtype(), DT_INT32);
  EXPECT_EQ(d.features.data<int32_t>()[1], 1000000);
  data::Dataset negative = Floats({0, -1, 3, 4}, 2);
  EXPECT_FALSE(FitDatasetToModel(spec, &negative).ok());
}

TEST(FitDatasetToModel, IdOutsideInputDimNamesLineAndColumn) {
  data::Dataset d = Floats({0, 1, 3, 50}, 2);
  const absl::Status status = FitDatasetToModel(EmbeddingModel(), &d);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("'train.csv': line 2, column 2: id 50 is outside the "
                        "vocabulary [0, 50)"));
}

TEST(FitDatasetToModel, FeatureCountMustMatchTheModel) {
  data::Dataset d = Floats({0, 1, 2}, 3);
  EXPECT_THAT(FitDatasetToModel(EmbeddingModel(), &d).message(),
              HasSubstr("'train.csv': examples have 3 features, but model "
                        "'ids' takes 2"));
}

TEST(FitDatasetToModel, FloatModelKeepsFloatsAndRefusesIds) {
  data::Dataset d = Floats({0.5, 1.5}, 2);
  ASSERT_TRUE(FitDatasetToModel(DenseModel(), &d).ok());
  EXPECT_EQ(d.features.dtype(), DT_FLOAT);
  ASSERT_TRUE(FitDatasetToModel(EmbeddingModel(), &d).code() ==
              absl::StatusCode::kInvalidArgument);
  data::Dataset ids = Floats({1, 2}, 2);
  ASSERT_TRUE(FitDatasetToModel(EmbeddingModel(), &ids).ok());
  EXPECT_THAT(FitDatasetToModel(DenseModel(), &ids).message(),
              HasSubstr("features are int32 ids, but model"));
  EXPECT_THAT(FitDatasetToModel(DenseModel(), &ids).message(),
              HasSubstr("takes floats"));
}

// Two float features and three ids per example, in that order.
ModelSpec TwoInputModel() {
  return Parse(R"({"class_name": "Model", "config": {"name": "two",
    "layers": [
      {"class_name": "InputLayer", "name": "dense", "inbound_nodes": [],
       "config": {"name": "dense", "batch_input_shape": [null, 2]}},
      {"class_name": "InputLayer", "name": "ids", "inbound_nodes": [],
       "config": {"name": "ids", "batch_input_shape": [null, 3]}},
      {"class_name": "Embedding", "name": "emb",
       "inbound_nodes": [[["ids", 0, 0, {}]]],
       "config": {"name": "emb", "input_dim": 10, "output_dim": 4}},
      {"class_name": "Flatten", "name": "flat",
       "inbound_nodes": [[["emb", 0, 0, {}]]], "config": {"name": "flat"}},
      {"class_name": "Concatenate", "name": "cat",
       "inbound_nodes": [[["dense", 0, 0, {}], ["flat", 0, 0, {}]]],
       "config": {"name": "cat"}},
      {"class_name": "Dense", "name": "out",
       "inbound_nodes": [[["cat", 0, 0, {}]]],
       "config": {"name": "out", "units": 1, "activation": "sigmoid"}}],
    "input_layers": [["dense", 0, 0], ["ids", 0, 0]],
    "output_layers": [["out", 0, 0]]}})");
}

TEST(FitDatasetToModel, SeveralInputsTakeTheRowInTheirOrder) {
  const ModelSpec spec = TwoInputModel();
  const std::vector<InputColumns> columns = ModelInputColumns(spec);
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_EQ(columns[0].begin, 0);
  EXPECT_EQ(columns[0].count, 2);
  EXPECT_FALSE(columns[0].ids);
  EXPECT_EQ(columns[1].begin, 2);
  EXPECT_EQ(columns[1].count, 3);
  EXPECT_TRUE(columns[1].ids);
  EXPECT_EQ(columns[1].vocabulary, 10);
  EXPECT_EQ(ModelFeedDtype(spec), DT_FLOAT);

  // Floats stay floats; the id columns are checked.
  data::Dataset d = Floats({0.5f, -1.25f, 1, 9, 0, 2.5f, 3, 4, 5, 6}, 5);
  ASSERT_TRUE(FitDatasetToModel(spec, &d).ok());
  EXPECT_EQ(d.features.dtype(), DT_FLOAT);
  data::Dataset bad = Floats({0.5f, -1.25f, 1, 10, 0}, 5);
  EXPECT_THAT(FitDatasetToModel(spec, &bad).message(),
              HasSubstr("line 1, column 4: id 10 is outside the vocabulary "
                        "[0, 10)"));
  data::Dataset fraction = Floats({0.5f, 1, 1, 2.5f, 0}, 5);
  EXPECT_THAT(FitDatasetToModel(spec, &fraction).message(),
              HasSubstr("column 4: 2.5 is not an integer id"));
  data::Dataset short_rows = Floats({1, 2, 3, 4}, 4);
  EXPECT_THAT(FitDatasetToModel(spec, &short_rows).message(),
              HasSubstr("examples have 4 features, but model 'two' takes 5 "
                        "(inputs dense [2], ids [3])"));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
