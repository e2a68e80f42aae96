#include "common/crc32c.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Test vectors from RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32c, MatchesRfc3720Vectors) {
  std::vector<unsigned char> buf(32, 0);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x8a9136aau);
  std::fill(buf.begin(), buf.end(), 0xff);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) buf[i] = i;
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) buf[i] = 31 - i;
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x113fdb5cu);
}

TEST(Crc32c, CheckValueAndEmpty) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32c, ExtendEqualsWholeAtEverySplit) {
  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>(i * 7));
  const uint32_t whole = Crc32c(text.data(), text.size());
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(Crc32cExtend(Crc32c(text.data(), split), text.data() + split,
                           text.size() - split),
              whole)
        << split;
  }
}

TEST(Crc32c, DetectsAFlippedBit) {
  std::string data(4096, 'x');
  const uint32_t before = Crc32c(data.data(), data.size());
  data[1234] ^= 0x10;
  EXPECT_NE(Crc32c(data.data(), data.size()), before);
}

}  // namespace
}  // namespace pstrain
