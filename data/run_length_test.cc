#include "data/run_length.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

TrainingConfig Config(int batch, int epochs, int64_t steps) {
  TrainingConfig config;
  config.set_batch_size_per_worker(batch);
  config.set_epochs(epochs);
  config.set_steps(steps);
  config.set_seed(7);
  return config;
}

TEST(RunLength, EpochsTimesFullStepsRemainderDropped) {
  // 2 workers x batch 8 = 16 examples a step: 100 examples fill 6 steps.
  absl::StatusOr<RunLength> length =
      ComputeRunLength(Config(8, 3, 0), /*num_workers=*/2, 100);
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(length->steps_per_epoch, 6);
  EXPECT_EQ(length->total_steps, 18);
}

TEST(RunLength, StepsBoundTheRunWhenSet) {
  absl::StatusOr<RunLength> length =
      ComputeRunLength(Config(10, 5, 7), /*num_workers=*/1, 100);
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(length->steps_per_epoch, 10);
  EXPECT_EQ(length->total_steps, 7);
}

TEST(RunLength, TooFewExamplesForOneStepIsRefusedWithTheCounts) {
  absl::StatusOr<RunLength> length =
      ComputeRunLength(Config(8, 1, 0), /*num_workers=*/4, 31);
  ASSERT_FALSE(length.ok());
  EXPECT_EQ(length.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(length.status().message().find("31 examples"), std::string::npos)
      << length.status();
  EXPECT_NE(length.status().message().find("4 workers x batch 8"),
            std::string::npos)
      << length.status();
}

TEST(RunLength, ShardOptionsCarryTheRunsBatchSeedAndWorker) {
  const ShardOptions options = RunShardOptions(Config(16, 1, 0), 3, 2);
  EXPECT_EQ(options.num_workers, 3);
  EXPECT_EQ(options.worker_index, 2);
  EXPECT_EQ(options.batch_size, 16);
  EXPECT_EQ(options.seed, 7u);
  EXPECT_TRUE(options.shuffle);
  EXPECT_TRUE(options.drop_remainder);
}

}  // namespace
}  // namespace data
}  // namespace pstrain
