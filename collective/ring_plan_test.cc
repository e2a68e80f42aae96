#include "collective/ring_plan.h"

#include <cstdint>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace collective {
namespace {

TEST(RingPlan, SegmentsCoverTheBufferWithLengthsWithinOne) {
  for (int size = 1; size <= 7; ++size) {
    for (int64_t n : {0, 1, 2, 5, 6, 7, 100, 1001}) {
      absl::StatusOr<RingPlan> plan = RingPlan::Make(size, n, 3);
      ASSERT_TRUE(plan.ok()) << plan.status();
      int64_t next = 0;
      int64_t shortest = n, longest = 0;
      for (int s = 0; s < size; ++s) {
        EXPECT_EQ(plan->SegmentBegin(s), next);
        next += plan->SegmentLength(s);
        shortest = std::min(shortest, plan->SegmentLength(s));
        longest = std::max(longest, plan->SegmentLength(s));
        int64_t chunked = 0;
        for (int c = 0; c < plan->NumChunks(s); ++c) {
          EXPECT_GE(plan->ChunkLength(s, c), 1);
          EXPECT_LE(plan->ChunkLength(s, c), 3);
          chunked += plan->ChunkLength(s, c);
        }
        EXPECT_EQ(chunked, plan->SegmentLength(s));
      }
      EXPECT_EQ(next, n) << "size " << size;
      EXPECT_LE(longest - shortest, 1);
    }
  }
}

TEST(RingPlan, WhatARankReceivesItSendsAtTheNextStep) {
  for (int size = 2; size <= 6; ++size) {
    RingPlan plan = *RingPlan::Make(size, 100, 7);
    for (int step = 0; step < plan.num_steps(); ++step) {
      std::set<int> sent;
      for (int rank = 0; rank < size; ++rank) {
        sent.insert(plan.SendSegment(rank, step));
        EXPECT_EQ(plan.ReceiveSegment(rank, step),
                  plan.SendSegment((rank + size - 1) % size, step));
        if (step + 1 < plan.num_steps()) {
          EXPECT_EQ(plan.SendSegment(rank, step + 1),
                    plan.ReceiveSegment(rank, step));
        }
      }
      EXPECT_EQ(sent.size(), static_cast<size_t>(size)) << "step " << step;
    }
  }
}

// Runs the plan on sets of contributions: after it, every rank holds every
// rank's contribution to every segment, each exactly once.
TEST(RingPlan, EveryRankEndsWithEveryContributionToEverySegment) {
  for (int size = 1; size <= 6; ++size) {
    RingPlan plan = *RingPlan::Make(size, 50, 4);
    // held[rank][segment]: the contributions summed there, with counts.
    std::vector<std::vector<std::vector<int>>> held(
        size, std::vector<std::vector<int>>(size, std::vector<int>(size, 0)));
    for (int rank = 0; rank < size; ++rank) {
      for (int s = 0; s < size; ++s) held[rank][s][rank] = 1;
    }
    for (int step = 0; step < plan.num_steps(); ++step) {
      auto before = held;
      for (int rank = 0; rank < size; ++rank) {
        int left = (rank + size - 1) % size;
        int segment = plan.ReceiveSegment(rank, step);
        const std::vector<int>& incoming = before[left][segment];
        for (int c = 0; c < size; ++c) {
          if (plan.IsReduceStep(step)) {
            held[rank][segment][c] += incoming[c];
          } else {
            held[rank][segment][c] = incoming[c];
          }
        }
      }
    }
    for (int rank = 0; rank < size; ++rank) {
      for (int s = 0; s < size; ++s) {
        EXPECT_EQ(held[rank][s], std::vector<int>(size, 1))
            << "size " << size << " rank " << rank << " segment " << s;
      }
    }
  }
}

TEST(RingPlan, RefusesBadLayoutsNamingTheValue) {
  EXPECT_EQ(RingPlan::Make(0, 10, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(RingPlan::Make(2, -1, 1).status().message().find("-1"),
            std::string::npos);
  EXPECT_NE(RingPlan::Make(2, 10, 0).status().message().find("chunk"),
            std::string::npos);
  EXPECT_EQ(RingPlan::Make(1, int64_t{1} << 40, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace collective
}  // namespace pstrain
