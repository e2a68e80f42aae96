#include "chief/membership.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

std::vector<std::pair<int, int64_t>> Pairs(const std::vector<BatchRef>& batches) {
  std::vector<std::pair<int, int64_t>> pairs;
  for (const BatchRef& b : batches) pairs.emplace_back(b.worker, b.step);
  return pairs;
}

using Batches = std::vector<std::pair<int, int64_t>>;

TEST(Membership, TheNextPresentWorkerCoversAnAbsentOne) {
  Membership m = WithAbsent(Membership(), 1, /*stuck=*/10, 4);
  EXPECT_TRUE(IsAbsent(m, 1));
  EXPECT_EQ(CoveringWorker(m, 1, 4), 2);
  m = WithAbsent(m, 2, 20, 4);
  EXPECT_EQ(CoveringWorker(m, 1, 4), 3);
  EXPECT_EQ(CoveringWorker(m, 2, 4), 3);
  m = WithAbsent(m, 3, 30, 4);
  EXPECT_EQ(CoveringWorker(m, 3, 4), 0);
  EXPECT_EQ(AbsentWorkers(m), (std::vector<int>{1, 2, 3}));
}

TEST(Membership, TheStepADeadWorkerDidNotFinishIsTrainedOnce) {
  // Worker 1 of 3 dies in step 10: from step 11 worker 2 trains its batches
  // of steps 10 and 11, then one a step.
  const Membership m = WithAbsent(Membership(), 1, 10, 3);
  EXPECT_EQ(m.from_step(), 11);
  EXPECT_EQ(Pairs(CoveredBatches(m, 2, 11, 3)), (Batches{{1, 10}, {1, 11}}));
  EXPECT_EQ(Pairs(CoveredBatches(m, 2, 12, 3)), (Batches{{1, 12}}));
  EXPECT_TRUE(CoveredBatches(m, 0, 11, 3).empty());
}

TEST(Membership, ACoveringWorkerThatDiesPassesOnWhatItOwed) {
  // Worker 1 dies in step 10 (covered by 2); worker 2 dies in step 20:
  // worker 0 covers both, owing their batches of step 20.
  Membership m = WithAbsent(Membership(), 1, 10, 3);
  m = WithAbsent(m, 2, 20, 3);
  EXPECT_EQ(Pairs(CoveredBatches(m, 0, 21, 3)),
            (Batches{{1, 20}, {1, 21}, {2, 20}, {2, 21}}));
  EXPECT_EQ(Pairs(CoveredBatches(m, 0, 22, 3)), (Batches{{1, 22}, {2, 22}}));
}

TEST(Membership, AWorkerThatComesBackTrainsItsOwnShareAgain) {
  Membership m = WithAbsent(Membership(), 1, 10, 3);
  m = WithPresent(m, 1, 40);
  EXPECT_FALSE(IsAbsent(m, 1));
  EXPECT_TRUE(CoveredBatches(m, 2, 40, 3).empty());
}

TEST(Membership, ARecoveryOwesAbsentBatchesFromTheRestoredStep) {
  Membership m = WithAbsent(Membership(), 1, 10, 3);
  m = RestartedAt(m, 5);
  EXPECT_EQ(Pairs(CoveredBatches(m, 2, 5, 3)), (Batches{{1, 5}}));
  EXPECT_EQ(Pairs(CoveredBatches(m, 2, 6, 3)), (Batches{{1, 6}}));
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
