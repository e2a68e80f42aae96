#include "worker/model_input.h"

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
              HasSubstr("does not start with an Embedding"));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
