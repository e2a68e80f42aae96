#include "data/data_dir.h"

#include <sys/stat.h>

#include <string>

#include "data/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

using ::testing::HasSubstr;

std::string MakeDir(const std::string& name) {
  const std::string dir = TempPath(name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(ReadDataDir, ReadsCsvSplitsWhenTrainCsvIsThere) {
  const std::string dir = MakeDir("csv_dir");
  WriteFile(dir + "/train.csv", "1,2,0\n3,4,1\n5,6,1\n");
  WriteFile(dir + "/test.csv", "7,8,0\n");
  absl::StatusOr<Dataset> train = ReadDataDir(dir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size(), 3);
  EXPECT_EQ(train->origin.path, dir + "/train.csv");
  absl::StatusOr<Dataset> test = ReadDataDir(dir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->size(), 1);
  EXPECT_EQ(test->features.data<float>()[1], 8.0f);
}

TEST(ReadDataDir, SkipsACsvHeaderOfNames) {
  const std::string dir = MakeDir("csv_header");
  WriteFile(dir + "/train.csv", "a,b,label\n1,2,0\n3,4,1\n");
  WriteFile(dir + "/test.csv", "7,8,0\n");
  absl::StatusOr<Dataset> train = ReadDataDir(dir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size(), 2);
  absl::StatusOr<Dataset> test = ReadDataDir(dir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->size(), 1);
}

TEST(ReadDataDir, MissingTestCsvNamesTheFile) {
  const std::string dir = MakeDir("csv_no_test");
  WriteFile(dir + "/train.csv", "1,0\n");
  absl::StatusOr<Dataset> test = ReadDataDir(dir, Split::kTest);
  EXPECT_FALSE(test.ok());
  EXPECT_THAT(test.status().message(), HasSubstr("test.csv"));
}

TEST(ReadDataDir, ReadsIdxOtherwise) {
  const std::string dir = MakeDir("idx_dir");
  WriteFile(dir + "/t10k-images-idx3-ubyte.gz", Gzip(IdxImages(2, 2, 3)));
  WriteFile(dir + "/t10k-labels-idx1-ubyte.gz", Gzip(IdxLabels({4, 9})));
  absl::StatusOr<Dataset> test = ReadDataDir(dir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->features.shape(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(test->labels, (std::vector<int32_t>{4, 9}));
  absl::StatusOr<Dataset> train = ReadDataDir(dir, Split::kTrain);
  EXPECT_FALSE(train.ok());
  EXPECT_THAT(train.status().message(), HasSubstr("train-images-idx3-ubyte.gz"));
}

}  // namespace
}  // namespace data
}  // namespace pstrain
