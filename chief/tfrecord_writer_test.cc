#include "chief/tfrecord_writer.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/crc32c.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

uint64_t ReadLittleEndian(const std::string& bytes, size_t at, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  }
  return value;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(MaskedCrc32c, RotatesAndAddsTheConstant) {
  // CRC32C("123456789") is 0xe3069283 (the check value of the Castagnoli
  // polynomial); rotated right by 15 bits it is 0x2507c60d.
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(MaskedCrc32c("123456789", 9), 0x2507c60du + 0xa282ead8u);
}

TEST(FrameTfRecord, LengthAndBothCrcsAroundTheData) {
  const std::string framed = FrameTfRecord("hello");
  ASSERT_EQ(framed.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(ReadLittleEndian(framed, 0, 8), 5u);
  EXPECT_EQ(ReadLittleEndian(framed, 8, 4), MaskedCrc32c(framed.data(), 8));
  EXPECT_EQ(framed.substr(12, 5), "hello");
  EXPECT_EQ(ReadLittleEndian(framed, 17, 4), MaskedCrc32c("hello", 5));
}

TEST(FrameTfRecord, EmptyRecordStillHasItsCrcs) {
  const std::string framed = FrameTfRecord("");
  ASSERT_EQ(framed.size(), 16u);
  EXPECT_EQ(ReadLittleEndian(framed, 0, 8), 0u);
  EXPECT_EQ(ReadLittleEndian(framed, 12, 4), MaskedCrc32c("", 0));
}

TEST(TfRecordWriter, RecordsFollowEachOtherInTheFile) {
  const std::string path =
      std::string(getenv("TEST_TMPDIR")) + "/records.tfrecord";
  {
    absl::StatusOr<std::unique_ptr<TfRecordWriter>> writer =
        TfRecordWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Write("first").ok());
    ASSERT_TRUE((*writer)->Write(std::string(300, 'x')).ok());
    // Written through already, before the writer closes.
    EXPECT_EQ(Slurp(path),
              FrameTfRecord("first") + FrameTfRecord(std::string(300, 'x')));
  }
  EXPECT_EQ(Slurp(path),
            FrameTfRecord("first") + FrameTfRecord(std::string(300, 'x')));
}

TEST(TfRecordWriter, RefusesAnExistingFileAndNamesIt) {
  const std::string path =
      std::string(getenv("TEST_TMPDIR")) + "/exists.tfrecord";
  std::ofstream(path) << "x";
  absl::StatusOr<std::unique_ptr<TfRecordWriter>> writer =
      TfRecordWriter::Create(path);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(writer.status().message().find(path), std::string::npos);
}

TEST(TfRecordWriter, MissingDirectoryIsNotFound) {
  absl::StatusOr<std::unique_ptr<TfRecordWriter>> writer =
      TfRecordWriter::Create(std::string(getenv("TEST_TMPDIR")) +
                             "/no/such/dir/x");
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
