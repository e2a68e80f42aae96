#include "common/command_line.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(CommandLine, OwnFlagsAreThoseOfTheBinarysMain) {
  EXPECT_TRUE(IsBinaryFlagFile("chief", "chief/main.cc"));
  EXPECT_TRUE(IsBinaryFlagFile("chief", "/src/pstrain/chief/main.cc"));
  EXPECT_FALSE(IsBinaryFlagFile("chief", "ps/main.cc"));
  EXPECT_FALSE(IsBinaryFlagFile("ps", "grpc/ps/main.cc.orig"));
  EXPECT_FALSE(IsBinaryFlagFile("ps", "tests/ps/main.cc_helper.cc"));
  EXPECT_FALSE(IsBinaryFlagFile("ps", "absl/flags/parse.cc"));
  EXPECT_FALSE(IsBinaryFlagFile("worker", "myworker/main.cc"));
}

TEST(CommandLine, VersionNamesBinaryAndVersion) {
  EXPECT_EQ(VersionText("ps", ""), "ps (pstrain 0.1.0)\n");
  EXPECT_EQ(VersionText("chief", "1a7e882c0b35"),
            "chief (pstrain 0.1.0, commit 1a7e882c0b35)\n");
}

}  // namespace
}  // namespace pstrain
