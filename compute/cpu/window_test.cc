#include "compute/cpu/window.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

struct Case {
  int64_t input, kernel, stride;
  Padding padding;
  int64_t output, pad_before, pad_after;
};

TEST(KerasWindow, MatchesKerasOutputSizesAndPadding) {
  // Expected values as TensorFlow computes them for Conv2D / MaxPool2D.
  const Case cases[] = {
      {5, 3, 1, Padding::kValid, 3, 0, 0},
      {5, 3, 2, Padding::kValid, 2, 0, 0},
      {6, 3, 2, Padding::kValid, 2, 0, 0},
      {28, 2, 2, Padding::kValid, 14, 0, 0},
      {5, 3, 1, Padding::kSame, 5, 1, 1},
      {5, 2, 1, Padding::kSame, 5, 0, 1},  // Odd total: extra at the end.
      {5, 3, 2, Padding::kSame, 3, 1, 1},
      {6, 3, 2, Padding::kSame, 3, 0, 1},
      {28, 3, 2, Padding::kSame, 14, 0, 1},
      {7, 1, 3, Padding::kSame, 3, 0, 0},
      {5, 5, 1, Padding::kSame, 5, 2, 2},
      {3, 5, 1, Padding::kSame, 3, 2, 2},  // Kernel larger than input.
      // Causal (Conv1D): kernel - 1 before, none after.
      {6, 3, 1, Padding::kCausal, 6, 2, 0},
      {7, 3, 2, Padding::kCausal, 4, 2, 0},
      {4, 5, 1, Padding::kCausal, 4, 4, 0},  // A dilated extent (3 taps, 2).
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "input " << c.input << " kernel "
                                    << c.kernel << " stride " << c.stride);
    absl::StatusOr<Window> w =
        KerasWindow(c.input, c.kernel, c.stride, c.padding);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->output, c.output);
    EXPECT_EQ(w->pad_before, c.pad_before);
    EXPECT_EQ(w->pad_after, c.pad_after);
  }
}

TEST(KerasWindow, RejectsKernelLargerThanValidInput) {
  EXPECT_EQ(KerasWindow(2, 3, 1, Padding::kValid).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KerasWindow, RejectsNonPositiveSizes) {
  EXPECT_FALSE(KerasWindow(0, 1, 1, Padding::kSame).ok());
  EXPECT_FALSE(KerasWindow(4, 0, 1, Padding::kSame).ok());
  EXPECT_FALSE(KerasWindow(4, 1, 0, Padding::kValid).ok());
}

TEST(DilatedExtent, IsTapsMinusOneTimesDilationPlusOne) {
  EXPECT_EQ(DilatedExtent(3, 1), 3);
  EXPECT_EQ(DilatedExtent(3, 2), 5);
  EXPECT_EQ(DilatedExtent(1, 4), 1);
  EXPECT_EQ(DilatedExtent(2, 3), 4);
}

TEST(FlattenedSize, IsHeightTimesWidthTimesChannels) {
  EXPECT_EQ(FlattenedSize(7, 7, 64), 3136);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
