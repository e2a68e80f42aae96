#include "data/dataset.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

using ::testing::HasSubstr;

Dataset Bytes(std::vector<int64_t> shape, int num_classes) {
  Dataset d;
  d.features = *Tensor::Create(DT_UINT8, shape);
  for (int64_t i = 0; i < d.features.num_elements(); ++i) {
    d.features.data<uint8_t>()[i] = static_cast<uint8_t>(i * 40);
  }
  d.labels.assign(shape[0], 0);
  d.num_classes = num_classes;
  return d;
}

TEST(Dataset, GatherScalesBytesToUnitInterval) {
  Dataset d = Bytes({3, 2}, 10);  // Rows {0, 40}, {80, 120}, {160, 200}.
  d.features.data<uint8_t>()[5] = 255;
  std::vector<float> out(6);
  GatherFeatures(d, {2, 0, 2}, absl::MakeSpan(out));
  EXPECT_EQ(out, (std::vector<float>{160 / 255.0f, 1.0f, 0.0f, 40 / 255.0f,
                                     160 / 255.0f, 1.0f}));
}

TEST(Dataset, GatherCopiesFloatsUnchanged) {
  Dataset d;
  d.features = *Tensor::Create(DT_FLOAT, {2, 3});
  for (int i = 0; i < 6; ++i) d.features.data<float>()[i] = 0.5f * i - 1;
  d.labels = {1, 0};
  d.num_classes = 2;
  std::vector<float> out(3);
  GatherFeatures(d, {1}, absl::MakeSpan(out));
  EXPECT_EQ(out, (std::vector<float>{0.5f, 1.0f, 1.5f}));
}

TEST(Dataset, ValidateAcceptsWellFormedDataset) {
  EXPECT_TRUE(ValidateDataset(Bytes({4, 2, 2}, 3)).ok());
}

TEST(Dataset, ValidateRefusesOtherDtypes) {
  Dataset d;
  d.features = *Tensor::Create(DT_INT64, {1});
  d.labels = {0};
  d.num_classes = 1;
  EXPECT_EQ(ValidateDataset(d).message(),
            "dataset features are int64; expected uint8, float32 or int32 ids");
}

TEST(Dataset, ValidateRefusesRowCountMismatch) {
  Dataset d = Bytes({4, 2}, 3);
  d.labels.pop_back();
  EXPECT_EQ(ValidateDataset(d).message(),
            "dataset features of shape [4, 2] do not have one row for each of "
            "its 3 labels");
}

TEST(Dataset, ValidateNamesLabelOutOfRange) {
  Dataset d = Bytes({4, 2}, 3);
  d.labels[2] = 3;
  absl::Status status = ValidateDataset(d);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("label 3 at index 2"));
}

}  // namespace
}  // namespace data
}  // namespace pstrain
