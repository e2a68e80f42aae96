#include "parallel/local_group_collective.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace parallel {
namespace {

// Runs `body(rank, member)` on one thread per member and joins them.
template <typename Body>
void OnThreads(LocalGroup& group, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r) {
    threads.emplace_back([&group, &body, r] {
      std::unique_ptr<GroupCollective> member = group.Member(r);
      body(r, member.get());
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(LocalGroup, ManyRoundsOfAllReduceAndAllGatherGiveEveryMemberTheResult) {
  LocalGroup group(3);
  std::vector<std::vector<float>> sums(3), gathers(3);
  OnThreads(group, [&](int r, GroupCollective* member) {
    EXPECT_EQ(member->size(), 3);
    EXPECT_EQ(member->rank(), r);
    for (int round = 0; round < 50; ++round) {
      std::vector<float> values = {float(r + 1), float(round), 10.0f * r};
      ASSERT_TRUE(member->AllReduceSum(absl::MakeSpan(values)).ok());
      // 1 + 2 + 3; 3 * round; 0 + 10 + 20.
      ASSERT_EQ(values, (std::vector<float>{6, 3.0f * round, 30}))
          << "round " << round << " member " << r;
      std::vector<float> piece = {float(r), float(round)};
      std::vector<float> all(6);
      ASSERT_TRUE(member->AllGather(piece, absl::MakeSpan(all)).ok());
      ASSERT_EQ(all, (std::vector<float>{0, float(round), 1, float(round), 2,
                                         float(round)}))
          << "round " << round << " member " << r;
    }
  });
}

TEST(LocalGroup, SumIsAddedInMemberOrderSoEveryMemberGetsTheSameBits) {
  LocalGroup group(3);
  std::vector<float> results(3);
  OnThreads(group, [&](int r, GroupCollective* member) {
    // (1e8 + -1e8) + 1 = 1 in member order; another order could give 0.
    const float mine[] = {1e8f, -1e8f, 1.0f};
    std::vector<float> values = {mine[r]};
    ASSERT_TRUE(member->AllReduceSum(absl::MakeSpan(values)).ok());
    results[r] = values[0];
  });
  EXPECT_EQ(results, (std::vector<float>{1, 1, 1}));
}

TEST(LocalGroup, MismatchedCallsAreRefusedToEveryMember) {
  LocalGroup group(2);
  std::vector<absl::Status> statuses(2);
  OnThreads(group, [&](int r, GroupCollective* member) {
    std::vector<float> values(r == 0 ? 4 : 5);
    statuses[r] = member->AllReduceSum(absl::MakeSpan(values));
  });
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("member 1 called AllReduceSum with 5 floats"),
              absl::string_view::npos)
        << s;
  }
  std::unique_ptr<GroupCollective> member = group.Member(0);
  std::vector<float> piece(2), small(3);
  EXPECT_EQ(member->AllGather(piece, absl::MakeSpan(small)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalGroup, CancelFailsWaitingAndLaterCalls) {
  LocalGroup group(2);
  absl::Status waited;
  std::thread waiter([&] {
    std::vector<float> values(3);
    waited = group.Member(0)->AllReduceSum(absl::MakeSpan(values));
  });
  group.Cancel(absl::AbortedError("member 1 failed"));
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted);
  std::vector<float> values(3);
  EXPECT_EQ(group.Member(1)->AllReduceSum(absl::MakeSpan(values)).code(),
            absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
