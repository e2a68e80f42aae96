#include "compute/gpu/batch_split.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

TEST(SplitBatch, GivesTheRemainderToTheFirstSlices) {
  absl::StatusOr<std::vector<BatchSlice>> slices = SplitBatch(100, 3);
  ASSERT_TRUE(slices.ok()) << slices.status();
  ASSERT_EQ(slices->size(), 3u);
  EXPECT_EQ((*slices)[0].offset, 0);
  EXPECT_EQ((*slices)[0].size, 34);
  EXPECT_EQ((*slices)[1].offset, 34);
  EXPECT_EQ((*slices)[1].size, 33);
  EXPECT_EQ((*slices)[2].offset, 67);
  EXPECT_EQ((*slices)[2].size, 33);
}

TEST(SplitBatch, SlicesAreContiguousAndCoverTheBatch) {
  for (int64_t batch : {0, 1, 7, 64, 1001}) {
    for (int parts : {1, 2, 3, 8}) {
      absl::StatusOr<std::vector<BatchSlice>> slices = SplitBatch(batch, parts);
      ASSERT_TRUE(slices.ok()) << slices.status();
      ASSERT_EQ(slices->size(), static_cast<size_t>(parts));
      int64_t next = 0;
      for (const BatchSlice& slice : *slices) {
        EXPECT_EQ(slice.offset, next) << batch << " / " << parts;
        EXPECT_GE(slice.size, batch / parts);
        EXPECT_LE(slice.size, batch / parts + 1);
        next += slice.size;
      }
      EXPECT_EQ(next, batch);
    }
  }
}

TEST(SplitBatch, SmallBatchLeavesTrailingSlicesEmpty) {
  absl::StatusOr<std::vector<BatchSlice>> slices = SplitBatch(2, 4);
  ASSERT_TRUE(slices.ok()) << slices.status();
  EXPECT_EQ((*slices)[0].size, 1);
  EXPECT_EQ((*slices)[1].size, 1);
  EXPECT_EQ((*slices)[2].size, 0);
  EXPECT_EQ((*slices)[3].size, 0);
  EXPECT_EQ((*slices)[3].offset, 2);
}

TEST(SplitBatch, RejectsNegativeBatchAndNoParts) {
  EXPECT_EQ(SplitBatch(-1, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitBatch(10, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
