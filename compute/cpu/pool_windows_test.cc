#include "compute/cpu/pool_windows.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

Pool2DShape Shape(int64_t pool, Padding padding) {
  Pool2DShape s;
  s.batch = 2;
  s.height = 5;
  s.width = 7;
  s.channels = 3;
  s.pool_h = s.pool_w = pool;
  s.stride_h = s.stride_w = pool;
  s.padding = padding;
  return s;
}

TEST(CheckPool2D, GivesKerasWindowsOfEachAxis) {
  absl::StatusOr<PoolWindows> valid =
      CheckPool2D("MaxPool2D", Shape(2, Padding::kValid));
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->height.output, 2);  // floor((5 - 2) / 2) + 1
  EXPECT_EQ(valid->width.output, 3);   // floor((7 - 2) / 2) + 1
  absl::StatusOr<PoolWindows> same =
      CheckPool2D("MaxPool2D", Shape(2, Padding::kSame));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->height.output, 3);  // ceil(5 / 2)
  EXPECT_EQ(same->height.pad_before, 0);
  EXPECT_EQ(same->height.pad_after, 1);
  EXPECT_EQ(same->width.output, 4);  // ceil(7 / 2)
}

TEST(CheckPool2D, RefusesNamingTheOpAndWhatIsWrong) {
  Pool2DShape s = Shape(2, Padding::kValid);
  s.stride_w = 0;
  EXPECT_EQ(CheckPool2D("MaxPool2D", s).status().message(),
            "MaxPool2D: stride_w must be positive, got 0");
  EXPECT_EQ(CheckPool2D("AvgPool2D", Shape(6, Padding::kValid))
                .status()
                .message(),
            "AvgPool2D height: valid padding: kernel 6 is larger than input 5");
  s = Shape(2, Padding::kValid);
  s.height = 9;
  s.pool_w = 8;
  EXPECT_EQ(CheckPool2D("MaxPool2D", s).status().message(),
            "MaxPool2D width: valid padding: kernel 8 is larger than input 7");
  EXPECT_TRUE(absl::IsInvalidArgument(CheckPool2D("MaxPool2D", s).status()));
}

TEST(CheckPool2D, RefusesASizeAboveTheGivenLimitNamingIt) {
  Pool2DShape s = Shape(2, Padding::kValid);
  s.batch = int64_t{1} << 31;
  EXPECT_TRUE(CheckPool2D("MaxPool2D", s).ok());  // No limit by default.
  EXPECT_EQ(CheckPool2D("MaxPool2D", s, /*max_size=*/(int64_t{1} << 31) - 1)
                .status()
                .message(),
            "MaxPool2D: batch must be at most 2147483647, got 2147483648");
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
