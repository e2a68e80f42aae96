#include "data/id_features.h"

#include <string>
#include <vector>

#include "data/csv_reader.h"
#include "data/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Dataset> Csv(const std::string& name,
                            const std::string& content) {
  const std::string path = TempPath(name);
  WriteFile(path, content);
  return ReadCsv(path);
}

TEST(ConvertFeaturesToIds, IntegerColumnsBecomeInt32Ids) {
  absl::StatusOr<Dataset> d = Csv("ids.csv", "3,0,1\n49,7.0,0\n");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(ConvertFeaturesToIds(50, &*d).ok());
  ASSERT_EQ(d->features.dtype(), DT_INT32);
  EXPECT_EQ(d->features.shape(), (std::vector<int64_t>{2, 2}));
  const int32_t* ids = d->features.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 4),
            (std::vector<int32_t>{3, 0, 49, 7}));
  EXPECT_EQ(d->labels, (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(ValidateDataset(*d).ok());
  EXPECT_EQ(FeedDtype(*d), DT_INT32);
}

TEST(ConvertFeaturesToIds, NonIntegerNamesFileLineAndColumn) {
  absl::StatusOr<Dataset> d = Csv("frac.csv", "1,2,0\n\n4,2.5,1\n");
  ASSERT_TRUE(d.ok()) << d.status();
  const absl::Status status = ConvertFeaturesToIds(50, &*d);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("frac.csv': line 3, column 2"));
  EXPECT_THAT(status.message(), HasSubstr("2.5 is not an integer id"));
  EXPECT_EQ(d->features.dtype(), DT_FLOAT);  // Unchanged.
}

TEST(ConvertFeaturesToIds, OutOfVocabularyNamesTheIdAndRange) {
  CsvOptions options;
  options.label_column = 0;
  options.header = CsvHeader::kYes;
  const std::string path = TempPath("range.csv");
  WriteFile(path, "label,a,b\n0,1,2\n1,3,50\n");
  absl::StatusOr<Dataset> d = ReadCsv(path, options);
  ASSERT_TRUE(d.ok()) << d.status();
  const absl::Status status = ConvertFeaturesToIds(50, &*d);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // The label is column 1, so the second feature is column 3.
  EXPECT_THAT(status.message(), HasSubstr("range.csv': line 3, column 3"));
  EXPECT_THAT(status.message(), HasSubstr("id 50 is outside the vocabulary "
                                          "[0, 50)"));
}

TEST(ConvertFeaturesToIds, NegativeIdIsRefused) {
  absl::StatusOr<Dataset> d = Csv("neg.csv", "-1,0\n");
  ASSERT_TRUE(d.ok()) << d.status();
  const absl::Status status = ConvertFeaturesToIds(10, &*d);
  EXPECT_THAT(status.message(), HasSubstr("line 1, column 1: id -1"));
}

TEST(ConvertFeaturesToIds, WithoutLinesNamesTheExample) {
  Dataset d;
  d.features = *Tensor::Create(DT_UINT8, {2, 3});
  for (int i = 0; i < 6; ++i) d.features.data<uint8_t>()[i] = i * 3;
  d.labels = {0, 1};
  d.num_classes = 2;
  d.origin.path = "images.gz";
  const absl::Status status = ConvertFeaturesToIds(12, &d);
  EXPECT_THAT(status.message(),
              HasSubstr("'images.gz': example 1, feature 1: id 12"));
  EXPECT_TRUE(ConvertFeaturesToIds(16, &d).ok());
  EXPECT_EQ(d.features.data<int32_t>()[5], 15);
}

TEST(ConvertFeaturesToIds, RefusesAnEmptyVocabulary) {
  Dataset d;
  d.features = *Tensor::Create(DT_FLOAT, {1, 1});
  d.labels = {0};
  d.num_classes = 1;
  EXPECT_EQ(ConvertFeaturesToIds(0, &d).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Dataset, GatherExamplesCopiesIds) {
  Dataset d;
  d.features = *Tensor::Create(DT_INT32, {3, 2});
  for (int i = 0; i < 6; ++i) d.features.data<int32_t>()[i] = 10 + i;
  d.labels = {0, 1, 0};
  d.num_classes = 2;
  std::vector<int32_t> out(4);
  GatherExamples(d, {2, 0}, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{14, 15, 10, 11}));
}

TEST(Dataset, NegativeIdsAreInvalid) {
  Dataset d;
  d.features = *Tensor::Create(DT_INT32, {2, 1});
  d.features.data<int32_t>()[0] = 1;
  d.features.data<int32_t>()[1] = -4;
  d.labels = {0, 0};
  d.num_classes = 1;
  EXPECT_THAT(ValidateDataset(d).message(), HasSubstr("id -4 is negative"));
}

}  // namespace
}  // namespace data
}  // namespace pstrain
