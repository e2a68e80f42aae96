#include "data/criteo_files.h"

#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "data/test_files.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

std::string MakeDir(const std::string& name) {
  const std::string dir = TempPath(name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(CriteoFiles, ListsEachSplitsFilesInNameOrder) {
  const std::string dir = MakeDir("criteo_files");
  for (const char* name :
       {"train-00001.tsv.gz", "train-00000.tsv", "train.tsv", "test.tsv.gz",
        "train.csv", "train-00002.tsv.bak", "xtrain.tsv", "test_b.tsv"}) {
    WriteFile(dir + "/" + name, "");
  }
  mkdir((dir + "/train-dir.tsv").c_str(), 0755);  // Not a regular file.
  absl::StatusOr<std::vector<std::string>> train =
      ListCriteoFiles(dir, DefaultCriteoPatterns("train"));
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(*train, (std::vector<std::string>{dir + "/train-00000.tsv",
                                              dir + "/train-00001.tsv.gz",
                                              dir + "/train.tsv"}));
  absl::StatusOr<std::vector<std::string>> test =
      ListCriteoFiles(dir, DefaultCriteoPatterns("test"));
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(*test, (std::vector<std::string>{dir + "/test.tsv.gz",
                                             dir + "/test_b.tsv"}));
}

TEST(CriteoFiles, NoMatchingFileIsNotFoundNamingTheDirectory) {
  const std::string dir = MakeDir("criteo_files_empty");
  WriteFile(dir + "/train.csv", "");
  absl::StatusOr<std::vector<std::string>> train =
      ListCriteoFiles(dir, DefaultCriteoPatterns("train"));
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(train.status().message().find(
                "no file named train*.tsv or train*.tsv.gz in '" + dir + "'"),
            absl::string_view::npos)
      << train.status();
}

TEST(CriteoFiles, MissingDirectoryIsNotFound) {
  absl::StatusOr<std::vector<std::string>> train =
      ListCriteoFiles(TempPath("no_such_dir"), DefaultCriteoPatterns("train"));
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(train.status().message().find("no_such_dir"),
            absl::string_view::npos);
}

// A download read as it lies: the Terabyte set's day files, days 0 to 22
// for training in the order of their numbers, day 23 for testing.
TEST(CriteoFiles, PatternsNameTheFilesOfADownloadInNaturalOrder) {
  const std::string dir = MakeDir("criteo_files_days");
  for (int day = 0; day < 24; ++day) {
    WriteFile(dir + "/day_" + std::to_string(day) + ".gz", "");
  }
  WriteFile(dir + "/.day_5.gz.swp", "");  // hidden: never a match
  WriteFile(dir + "/readme.txt", "");
  absl::StatusOr<std::vector<std::string>> train = ListCriteoFiles(
      dir, {"day_?.gz", "day_1?.gz", "day_2[0-2].gz", "day_1?.gz"});
  ASSERT_TRUE(train.ok()) << train.status();
  std::vector<std::string> want;
  for (int day = 0; day < 23; ++day) {
    want.push_back(dir + "/day_" + std::to_string(day) + ".gz");
  }
  EXPECT_EQ(*train, want);  // each file once, day_2 before day_10
  absl::StatusOr<std::vector<std::string>> test =
      ListCriteoFiles(dir, {"day_23.gz"});
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(*test, std::vector<std::string>{dir + "/day_23.gz"});
  absl::StatusOr<std::vector<std::string>> none =
      ListCriteoFiles(dir, {"day_24.gz", "day_x*"});
  EXPECT_EQ(none.status().message(), "no file named day_24.gz or day_x* in '" +
                                         dir + "' (--data_format=criteo)");
}

TEST(CriteoFiles, NaturalOrderComparesRunsOfDigitsAsNumbers) {
  const std::vector<std::string> sorted = {"",
                                           "1",
                                           "2",
                                           "10",
                                           "day_0",
                                           "day_00",
                                           "day_1",
                                           "day_2.gz",
                                           "day_9",
                                           "day_10",
                                           "day_010",
                                           "day_11",
                                           "day_100",
                                           "part1b2",
                                           "part1b10",
                                           "part2",
                                           "train-00000.tsv",
                                           "train-00001.tsv.gz",
                                           "train.tsv"};
  for (size_t i = 0; i < sorted.size(); ++i) {
    EXPECT_FALSE(NaturalLess(sorted[i], sorted[i])) << sorted[i];
    for (size_t j = i + 1; j < sorted.size(); ++j) {
      EXPECT_TRUE(NaturalLess(sorted[i], sorted[j]))
          << sorted[i] << " < " << sorted[j];
      EXPECT_FALSE(NaturalLess(sorted[j], sorted[i]))
          << sorted[j] << " >= " << sorted[i];
    }
  }
}

TEST(CriteoFiles, APatternMustNameFilesOfTheDirectoryItself) {
  EXPECT_TRUE(CheckCriteoPatterns({"day_*", "x?.tsv"}, "train_files").ok());
  EXPECT_EQ(CheckCriteoPatterns({"day_*", ""}, "train_files").message(),
            "--train_files: an empty pattern");
  EXPECT_EQ(CheckCriteoPatterns({"sub/day_1"}, "test_files").message(),
            "--test_files: 'sub/day_1' has a '/': patterns name files in "
            "--data_dir itself");
}

}  // namespace
}  // namespace data
}  // namespace pstrain
