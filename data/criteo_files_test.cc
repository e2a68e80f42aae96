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
      ListCriteoFiles(dir, "train");
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(*train, (std::vector<std::string>{dir + "/train-00000.tsv",
                                              dir + "/train-00001.tsv.gz",
                                              dir + "/train.tsv"}));
  absl::StatusOr<std::vector<std::string>> test = ListCriteoFiles(dir, "test");
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(*test, (std::vector<std::string>{dir + "/test.tsv.gz",
                                             dir + "/test_b.tsv"}));
}

TEST(CriteoFiles, NoMatchingFileIsNotFoundNamingTheDirectory) {
  const std::string dir = MakeDir("criteo_files_empty");
  WriteFile(dir + "/train.csv", "");
  absl::StatusOr<std::vector<std::string>> train =
      ListCriteoFiles(dir, "train");
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(train.status().message().find(
                "no train*.tsv or train*.tsv.gz file in '" + dir + "'"),
            absl::string_view::npos)
      << train.status();
}

TEST(CriteoFiles, MissingDirectoryIsNotFound) {
  absl::StatusOr<std::vector<std::string>> train =
      ListCriteoFiles(TempPath("no_such_dir"), "train");
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(train.status().message().find("no_such_dir"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace data
}  // namespace pstrain
