#include "common/flag_range.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(FlagRange, AtLeast) {
  EXPECT_TRUE(FlagAtLeast("epochs", 1, 1).ok());
  const absl::Status low = FlagAtLeast("epochs", 0, 1);
  EXPECT_EQ(low.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(low.message(), "--epochs: 0 must be >= 1");
}

TEST(FlagRange, InRangeIncludesBothEnds) {
  EXPECT_TRUE(FlagInRange("port", 0, 0, 65535).ok());
  EXPECT_TRUE(FlagInRange("port", 65535, 0, 65535).ok());
  EXPECT_EQ(FlagInRange("port", 65536, 0, 65535).message(),
            "--port: 65536 must be in [0, 65535]");
  EXPECT_EQ(FlagInRange("port", -1, 0, 65535).message(),
            "--port: -1 must be in [0, 65535]");
}

}  // namespace
}  // namespace pstrain
