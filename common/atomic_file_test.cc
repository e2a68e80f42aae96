#include "common/atomic_file.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string Dir() { return std::string(std::getenv("TEST_TMPDIR")); }

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AtomicFile, AppearsOnlyOnCommit) {
  const std::string path = Dir() + "/data";
  auto file = AtomicFile::Create(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<int64_t> a = (*file)->Append("hello ", 6);
  absl::StatusOr<int64_t> b = (*file)->Append("world", 5);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, 0);
  EXPECT_EQ(*b, 6);
  EXPECT_FALSE(Exists(path));
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(Read(path), "hello world");
}

TEST(AtomicFile, WithoutCommitLeavesNothingAndKeepsTheOldFile) {
  const std::string path = Dir() + "/kept";
  std::ofstream(path) << "old";
  {
    auto file = AtomicFile::Create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append("new", 3).ok());
  }
  EXPECT_EQ(Read(path), "old");
  EXPECT_FALSE(Exists(path + ".tmp-" + std::to_string(getpid())));
}

TEST(AtomicFile, ErrorsNameThePath) {
  auto file = AtomicFile::Create("/nonexistent-dir/x");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("open /nonexistent-dir/x.tmp-"),
            std::string::npos)
      << file.status();
}

TEST(AtomicFile, MakeDirectoriesCreatesParents) {
  const std::string path = Dir() + "/a/b/c";
  ASSERT_TRUE(MakeDirectories(path).ok());
  EXPECT_TRUE(Exists(path));
  EXPECT_TRUE(MakeDirectories(path).ok());  // again: fine
}

TEST(AtomicFile, CheckWritableDirectoryCreatesItAndLeavesItEmpty) {
  const std::string path = Dir() + "/run/model";
  ASSERT_TRUE(CheckWritableDirectory(path).ok());
  EXPECT_TRUE(Exists(path));
  EXPECT_FALSE(Exists(path + "/.pstrain-probe-" + std::to_string(getpid())));
  EXPECT_TRUE(CheckWritableDirectory(path).ok());  // again: fine
}

TEST(AtomicFile, CheckWritableDirectoryNamesWhatIsWrong) {
  const std::string file = Dir() + "/a-file";
  std::ofstream(file) << "x";
  absl::Status under_file = CheckWritableDirectory(file + "/model");
  EXPECT_EQ(under_file.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(under_file.message(), "mkdir " + file + "/model: Not a directory");
  // procfs: the directory exists, but no file can be created there (even
  // by root).
  absl::Status proc = CheckWritableDirectory("/proc/self");
  EXPECT_FALSE(proc.ok());
  EXPECT_EQ(proc.message().rfind("cannot create a file in /proc/self: ", 0), 0)
      << proc;
}

}  // namespace
}  // namespace pstrain
