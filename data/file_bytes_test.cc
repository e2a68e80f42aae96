#include "data/file_bytes.h"

#include <string>

#include "data/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

using ::testing::HasSubstr;

// Bytes that compress well but not trivially.
std::string Sample() {
  std::string s;
  for (int i = 0; i < 100000; ++i) {
    const int r = i % 251;
    s.push_back(static_cast<char>(r * r % 251));
  }
  return s;
}

TEST(FileBytes, ReadsRawFileAsIs) {
  const std::string path = TempPath("raw.bin");
  WriteFile(path, Sample());
  absl::StatusOr<FileBytes> file = ReadFileBytes(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->gzipped);
  EXPECT_EQ(file->bytes, Sample());
}

TEST(FileBytes, GunzipsByMagicWhateverTheName) {
  const std::string path = TempPath("no_gz_suffix.bin");
  WriteFile(path, Gzip(Sample()));
  absl::StatusOr<FileBytes> file = ReadFileBytes(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->gzipped);
  EXPECT_EQ(file->bytes, Sample());
}

TEST(FileBytes, ReadsConcatenatedGzipMembersAsOneStream) {
  const std::string path = TempPath("two_members.gz");
  WriteFile(path, Gzip("hello, ") + Gzip("world"));
  absl::StatusOr<FileBytes> file = ReadFileBytes(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->bytes, "hello, world");
}

TEST(FileBytes, ReadsEmptyFile) {
  const std::string path = TempPath("empty.bin");
  WriteFile(path, "");
  absl::StatusOr<FileBytes> file = ReadFileBytes(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->bytes, "");
}

TEST(FileBytes, MissingFileIsNotFoundNamingIt) {
  const std::string path = TempPath("does_not_exist.gz");
  absl::Status status = ReadFileBytes(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("'" + path + "'"));
  EXPECT_THAT(status.message(), HasSubstr("No such file"));
}

TEST(FileBytes, TruncatedGzipIsDataLoss) {
  const std::string path = TempPath("truncated.gz");
  const std::string gz = Gzip(Sample());
  WriteFile(path, gz.substr(0, gz.size() / 2));
  absl::Status status = ReadFileBytes(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              HasSubstr("'" + path + "': gzip stream ends early, after all " +
                        std::to_string(gz.size() / 2) + " compressed bytes"));
}

TEST(FileBytes, CorruptGzipIsDataLossNamingOffset) {
  const std::string path = TempPath("corrupt.gz");
  std::string gz = Gzip(Sample());
  gz[gz.size() - 6] ^= 0x55;  // In the CRC-32 trailer.
  WriteFile(path, gz);
  absl::Status status = ReadFileBytes(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              HasSubstr("'" + path +
                        "': corrupt gzip stream at compressed "
                        "offset "));
  EXPECT_THAT(status.message(), HasSubstr("incorrect data check"));
}

TEST(FileBytes, TrailingGarbageAfterGzipIsDataLoss) {
  const std::string path = TempPath("garbage_after.gz");
  const std::string gz = Gzip("abc");
  WriteFile(path, gz + "xyz");
  absl::Status status = ReadFileBytes(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              HasSubstr("3 unexpected bytes after the gzip stream at "
                        "compressed offset " +
                        std::to_string(gz.size())));
}

}  // namespace
}  // namespace data
}  // namespace pstrain
