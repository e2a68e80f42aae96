#include "ps/sync_step.h"

#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace ps {
namespace {

using Outcome = SyncStep::Outcome;

// Worker `sender`'s push of `batches` (32 examples each; owed or its own).
struct Push {
  Push(int sender, std::vector<int64_t> batches, bool owed = false)
      : batches(std::move(batches)) {
    c.sender = sender;
    c.batches = this->batches;
    c.owed = owed;
    c.batch_size = 32 * static_cast<int64_t>(this->batches.size());
  }
  std::vector<int64_t> batches;
  Contribution c;
};

Outcome Take(SyncStep& step, int sender, std::vector<int64_t> batches,
             bool owed = false) {
  return step.Take(Push(sender, std::move(batches), owed).c);
}

TEST(SyncStep, CompletesWithNeededContributionsCountingEachWorkerOnce) {
  SyncStep step;
  step.SetWorkers(2, {});
  ASSERT_EQ(Take(step, 0, {10}), Outcome::kAdded);
  EXPECT_EQ(Take(step, 0, {10}), Outcome::kCountedBefore);
  EXPECT_FALSE(step.complete());
  ASSERT_EQ(Take(step, 1, {11}), Outcome::kAdded);
  EXPECT_TRUE(step.complete());
  EXPECT_EQ(step.batch_sum(), 64);
  step.Next();
  EXPECT_FALSE(step.complete());
  EXPECT_EQ(step.batch_sum(), 0);
  EXPECT_EQ(Take(step, 0, {12}), Outcome::kAdded);
}

TEST(SyncStep, SendersThatAreNotWorkersAreNeverDeduplicated) {
  SyncStep step;
  step.SetWorkers(2, {});
  EXPECT_EQ(Take(step, -1, {}), Outcome::kAdded);
  EXPECT_EQ(Take(step, -1, {}), Outcome::kAdded);
  EXPECT_TRUE(step.complete());
}

TEST(SyncStep, SkipUpdateSticksUntilTheNextStep) {
  SyncStep step;
  step.SetWorkers(2, {});
  Push nan(0, {0});
  nan.c.skip_update = true;
  ASSERT_EQ(step.Take(nan.c), Outcome::kAdded);
  ASSERT_EQ(Take(step, 1, {1}), Outcome::kAdded);
  EXPECT_TRUE(step.skip_update());
  step.Next();
  EXPECT_FALSE(step.skip_update());
}

TEST(SyncStep, AnAbsentWorkersContributionStillNeedsEveryPresentOne) {
  // Three workers; worker 2 pushed this step here, then was presumed dead.
  SyncStep step;
  step.SetWorkers(3, {});
  ASSERT_EQ(Take(step, 2, {5}), Outcome::kAdded);
  ASSERT_EQ(Take(step, 0, {3}), Outcome::kAdded);
  step.SetWorkers(2, {2});
  // Its gradient stays in, and worker 1's must still come.
  EXPECT_FALSE(step.complete());
  EXPECT_EQ(Take(step, 2, {5}), Outcome::kAbsent);
  ASSERT_EQ(Take(step, 1, {4}), Outcome::kAdded);
  EXPECT_TRUE(step.complete());
  EXPECT_EQ(step.batch_sum(), 96);
  step.Next();
  // The next step needs the two present workers.
  ASSERT_EQ(Take(step, 0, {6}), Outcome::kAdded);
  EXPECT_FALSE(step.complete());
  ASSERT_EQ(Take(step, 1, {7}), Outcome::kAdded);
  EXPECT_TRUE(step.complete());
}

TEST(SyncStep, OwedBatchesAreAddedUnlessThisStepOrTheOneBeforeHeldThem) {
  SyncStep step;
  step.SetWorkers(2, {});
  ASSERT_EQ(Take(step, 0, {0}), Outcome::kAdded);
  ASSERT_EQ(Take(step, 1, {1}), Outcome::kAdded);
  step.Next();
  step.SetWorkers(1, {1});
  // Batch 1 (worker 1's, the step before) was applied: not again.
  EXPECT_EQ(Take(step, 0, {1}, /*owed=*/true), Outcome::kCountedBefore);
  // Batch 3 (worker 1's of this step) is new, once.
  EXPECT_EQ(Take(step, 0, {3}, true), Outcome::kAdded);
  EXPECT_EQ(Take(step, 0, {3}, true), Outcome::kCountedBefore);
  // An owed batch is not a contribution, but its examples count.
  EXPECT_FALSE(step.complete());
  ASSERT_EQ(Take(step, 0, {2}), Outcome::kAdded);
  EXPECT_TRUE(step.complete());
  EXPECT_EQ(step.batch_sum(), 64);
  step.Next();
  step.Next();
  // Two steps on, batch 1 is no longer remembered.
  EXPECT_EQ(Take(step, 0, {1}, true), Outcome::kAdded);
}

TEST(SyncStep, ResetForgetsWhatTheStepsHeld) {
  SyncStep step;
  step.SetWorkers(1, {});
  ASSERT_EQ(Take(step, 0, {7}), Outcome::kAdded);
  step.Next();
  step.Reset();
  EXPECT_EQ(Take(step, 0, {7}, true), Outcome::kAdded);
  EXPECT_EQ(Take(step, 0, {8}), Outcome::kAdded);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
