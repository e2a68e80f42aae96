#include "common/update_config.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

UpdateConfig Sync(int workers, int replicas) {
  UpdateConfig update;
  update.set_mode(UpdateConfig::SYNC);
  update.set_num_workers(workers);
  update.set_replicas_to_aggregate(replicas);
  return update;
}

TEST(UpdateConfig, ZeroReplicasMeansEveryWorker) {
  EXPECT_EQ(ReplicasToAggregate(Sync(3, 0)), 3);
  EXPECT_EQ(ReplicasToAggregate(Sync(3, 2)), 2);
}

TEST(UpdateConfig, ZeroStepTimeoutFallsBack) {
  UpdateConfig update = Sync(1, 0);
  EXPECT_EQ(StepTimeout(update), kDefaultStepTimeout);
  EXPECT_EQ(StepTimeout(update, absl::Seconds(5)), absl::Seconds(5));
  update.set_step_timeout_ms(1500);
  EXPECT_EQ(StepTimeout(update, absl::Seconds(5)), absl::Milliseconds(1500));
}

TEST(UpdateConfig, RefusalsNameTheField) {
  EXPECT_TRUE(CheckUpdateConfig(Sync(2, 2)).ok());
  UpdateConfig no_mode = Sync(2, 0);
  no_mode.set_mode(UpdateConfig::MODE_UNSPECIFIED);
  EXPECT_EQ(CheckUpdateConfig(no_mode).message(),
            "update.mode: must be SYNC or ASYNC");
  EXPECT_EQ(CheckUpdateConfig(Sync(0, 0)).message(),
            "update.num_workers: 0 must be >= 1");
  EXPECT_EQ(CheckUpdateConfig(Sync(2, 3)).message(),
            "update.replicas_to_aggregate: 3 must be in [0, num_workers 2]");
  UpdateConfig negative = Sync(2, 0);
  negative.set_step_timeout_ms(-1);
  EXPECT_EQ(CheckUpdateConfig(negative).message(),
            "update.step_timeout_ms: -1 is negative");
}

}  // namespace
}  // namespace pstrain
