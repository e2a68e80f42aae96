#include "data/shard_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

ShardPlan Plan(int64_t n, int workers, int worker, int64_t batch, bool drop,
               uint64_t seed = 1) {
  ShardOptions options;
  options.num_workers = workers;
  options.worker_index = worker;
  options.batch_size = batch;
  options.drop_remainder = drop;
  options.seed = seed;
  absl::StatusOr<ShardPlan> plan = ShardPlan::Create(n, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.value();  // Aborts, failing the test, on error.
}

// All workers' examples for `epoch`, concatenated, after checking that each
// worker's batches add up to its order.
std::vector<int64_t> ClusterEpoch(int64_t n, int workers, int64_t batch,
                                  bool drop, int64_t epoch) {
  std::vector<int64_t> all;
  const int64_t steps = Plan(n, workers, 0, batch, drop).steps_per_epoch();
  for (int w = 0; w < workers; ++w) {
    const ShardPlan plan = Plan(n, workers, w, batch, drop);
    EXPECT_EQ(plan.steps_per_epoch(), steps) << "worker " << w;
    const std::vector<int64_t> mine = plan.WorkerOrder(epoch);
    int64_t total = 0;
    for (int64_t s = 0; s < steps; ++s) {
      EXPECT_GE(plan.BatchSize(s), 0);
      EXPECT_LE(plan.BatchSize(s), batch);
      if (drop || s + 1 < steps) {
        EXPECT_EQ(plan.BatchSize(s), batch);
      }
      total += plan.BatchSize(s);
    }
    EXPECT_EQ(total, static_cast<int64_t>(mine.size())) << "worker " << w;
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(ShardPlan, KeepRemainderSeesEveryExampleExactlyOncePerEpoch) {
  for (int workers : {1, 2, 3}) {
    for (int64_t batch : {1, 4, 5}) {
      for (int64_t n : {0, 1, 2, 23, 24, 29}) {
        for (int64_t epoch : {0, 1}) {
          EXPECT_EQ(ClusterEpoch(n, workers, batch, false, epoch), Iota(n))
              << "N=" << n << " W=" << workers << " B=" << batch;
        }
      }
    }
  }
}

TEST(ShardPlan, DropRemainderSkipsExactlyNModWBOncePerEpoch) {
  for (int workers : {1, 2, 3}) {
    for (int64_t batch : {1, 4, 5}) {
      for (int64_t n : {0, 2, 23, 24, 29}) {
        const std::vector<int64_t> seen =
            ClusterEpoch(n, workers, batch, true, 3);
        EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
        const int64_t dropped = n % (workers * batch);
        EXPECT_EQ(static_cast<int64_t>(seen.size()), n - dropped);
        EXPECT_EQ(Plan(n, workers, 0, batch, true).dropped_per_epoch(),
                  dropped);
      }
    }
  }
}

TEST(ShardPlan, DropRemainderSkipsTheTailOfTheEpochOrder) {
  // N = 29, W = 3, B = 4: 2 steps of 24 examples; the order's last 5 skipped.
  const std::vector<int64_t> seen = ClusterEpoch(29, 3, 4, true, 0);
  const ShardPlan solo = Plan(29, 1, 0, 29, false);  // Same seed, all of it.
  std::vector<int64_t> head = solo.WorkerOrder(0);
  head.resize(24);
  std::sort(head.begin(), head.end());
  EXPECT_EQ(seen, head);
}

TEST(ShardPlan, StepsPerEpochFloorWhenDroppingCeilWhenKeeping) {
  EXPECT_EQ(Plan(29, 3, 0, 4, true).steps_per_epoch(), 2);
  EXPECT_EQ(Plan(29, 3, 2, 4, false).steps_per_epoch(), 3);
  EXPECT_EQ(Plan(24, 3, 1, 4, false).steps_per_epoch(), 2);
  EXPECT_EQ(Plan(24, 3, 1, 4, true).steps_per_epoch(), 2);
  EXPECT_EQ(Plan(5, 3, 0, 2, true).steps_per_epoch(), 0);
  EXPECT_EQ(Plan(29, 3, 2, 4, false).dropped_per_epoch(), 0);
}

TEST(ShardPlan, LastGlobalBatchIsCutIntoTheSameBlocks) {
  // N = 25, W = 3, B = 4: step 2 has R = 1 example, for worker 0 only.
  EXPECT_EQ(Plan(25, 3, 0, 4, false).BatchSize(2), 1);
  EXPECT_EQ(Plan(25, 3, 1, 4, false).BatchSize(2), 0);
  EXPECT_EQ(Plan(25, 3, 2, 4, false).BatchSize(2), 0);
  // N = 29: R = 5 is a full block of 4 and one of 1.
  EXPECT_EQ(Plan(29, 3, 0, 4, false).BatchSize(2), 4);
  EXPECT_EQ(Plan(29, 3, 1, 4, false).BatchSize(2), 1);
  EXPECT_EQ(Plan(29, 3, 2, 4, false).BatchSize(2), 0);
  EXPECT_EQ(Plan(29, 3, 1, 4, false).WorkerOrder(0).size(), 9u);
}

TEST(ShardPlan, WorkerTakesItsBlockOfEachGlobalBatch) {
  // N = 10, W = 3, B = 2: global batches at positions 0..5 and 6..9, the
  // last cut into blocks of 2, 2 and 0. Worker w's example j of a step is
  // example w*B + j of the global batch, as in one process of batch W*B.
  const std::vector<int64_t> all = Plan(10, 1, 0, 10, false).WorkerOrder(4);
  EXPECT_EQ(Plan(10, 3, 0, 2, false).WorkerOrder(4),
            (std::vector<int64_t>{all[0], all[1], all[6], all[7]}));
  EXPECT_EQ(Plan(10, 3, 1, 2, false).WorkerOrder(4),
            (std::vector<int64_t>{all[2], all[3], all[8], all[9]}));
  EXPECT_EQ(Plan(10, 3, 2, 2, false).WorkerOrder(4),
            (std::vector<int64_t>{all[4], all[5]}));
}

TEST(ShardPlan, SameSeedAndEpochGiveSameOrderOnSeparatePlans) {
  EXPECT_EQ(Plan(100, 2, 1, 8, false, 9).WorkerOrder(2),
            Plan(100, 2, 1, 8, false, 9).WorkerOrder(2));
  EXPECT_NE(Plan(100, 2, 1, 8, false, 9).WorkerOrder(3),
            Plan(100, 2, 1, 8, false, 9).WorkerOrder(2));
  EXPECT_NE(Plan(100, 2, 1, 8, false, 10).WorkerOrder(2),
            Plan(100, 2, 1, 8, false, 9).WorkerOrder(2));
}

TEST(ShardPlan, WithoutShufflingEpochsVisitInIndexOrder) {
  ShardOptions options;
  options.num_workers = 2;
  options.worker_index = 1;
  options.batch_size = 2;
  options.shuffle = false;
  absl::StatusOr<ShardPlan> plan = ShardPlan::Create(7, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Global batches 0..3 and 4..6.
  EXPECT_EQ(plan->WorkerOrder(5), (std::vector<int64_t>{2, 3, 6}));
}

TEST(ShardPlan, CreateRefusesBadOptions) {
  ShardOptions options;
  options.num_workers = 2;
  options.worker_index = 2;
  EXPECT_EQ(ShardPlan::Create(10, options).status().message(),
            "ShardOptions.worker_index is 2; must be in 0..1");
  options.worker_index = 0;
  options.batch_size = 0;
  EXPECT_EQ(ShardPlan::Create(10, options).status().message(),
            "ShardOptions.batch_size is 0; must be >= 1");
  options.batch_size = 1;
  options.num_workers = 0;
  EXPECT_EQ(ShardPlan::Create(10, options).status().message(),
            "ShardOptions.num_workers is 0; must be >= 1");
  options.num_workers = 1;
  EXPECT_EQ(ShardPlan::Create(-1, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace data
}  // namespace pstrain
