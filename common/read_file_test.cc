#include "common/read_file.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ReadFileAtMost, ReadsAFileUpToTheBound) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/f";
  const std::string content(100000, 'x');
  std::ofstream(path, std::ios::binary) << content;
  absl::StatusOr<std::string> read = ReadFileAtMost(path, content.size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, content);
  absl::StatusOr<std::string> over = ReadFileAtMost(path, content.size() - 1);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(over.status().message(), path + " is larger than 99999 bytes");
}

TEST(ReadFileAtMost, AnEndlessFileStopsAtTheBound) {
  absl::StatusOr<std::string> zero = ReadFileAtMost("/dev/zero", 1 << 20);
  EXPECT_EQ(zero.status().message(), "/dev/zero is larger than 1048576 bytes");
}

TEST(ReadFileAtMost, NamesThePathAndTheReason) {
  absl::StatusOr<std::string> missing = ReadFileAtMost("/nonexistent/f", 10);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "cannot read /nonexistent/f: No such file or directory");
  absl::StatusOr<std::string> dir = ReadFileAtMost("/tmp", 10);
  EXPECT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(), "cannot read /tmp: Is a directory");
}

}  // namespace
}  // namespace pstrain
