// RingGroupCollective over real gRPC: one RingParticipant per member in this
// process, each with its server on 127.0.0.1 at a port picked at run time.
#include "parallel/ring_group_collective.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/ring_participant.h"
#include "common/metrics.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace parallel {
namespace {

std::vector<std::unique_ptr<collective::RingParticipant>> StartRing(int size) {
  std::vector<std::string> peers;
  for (int i = 0; i < size; ++i) {
    peers.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  std::vector<std::unique_ptr<collective::RingParticipant>> ring;
  for (int rank = 0; rank < size; ++rank) {
    collective::RingParticipantOptions options;
    options.rank = rank;
    options.peers = peers;
    auto participant = collective::RingParticipant::Start(options);
    EXPECT_TRUE(participant.ok()) << participant.status();
    if (!participant.ok()) return {};
    ring.push_back(std::move(*participant));
  }
  return ring;
}

TEST(RingGroupCollective, AllReduceAndAllGatherOverGrpc) {
  constexpr int kSize = 3;
  auto ring = StartRing(kSize);
  ASSERT_EQ(ring.size(), size_t{kSize});
  std::vector<std::vector<float>> sums(kSize), gathers(kSize);
  std::vector<absl::Status> errors(kSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      RingGroupCollective group(ring[r]->ring(), r, kSize);
      EXPECT_EQ(group.size(), kSize);
      EXPECT_EQ(group.rank(), r);
      for (int round = 0; round < 5 && errors[r].ok(); ++round) {
        std::vector<float> values = {float(r + 1), float(round), -2.0f * r};
        errors[r] = group.AllReduceSum(absl::MakeSpan(values));
        if (!errors[r].ok()) break;
        sums[r] = values;
        std::vector<float> piece = {float(10 * r), float(10 * r + round)};
        std::vector<float> all(2 * kSize);
        errors[r] = group.AllGather(piece, absl::MakeSpan(all));
        gathers[r] = all;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kSize; ++r) {
    ASSERT_TRUE(errors[r].ok()) << errors[r];
    // The last round's (round 4).
    EXPECT_EQ(sums[r], (std::vector<float>{6, 12, -6})) << r;
    EXPECT_EQ(gathers[r], (std::vector<float>{0, 4, 10, 14, 20, 24})) << r;
  }
}

TEST(RingGroupCollective, AllGatherRefusesAWrongSizedResult) {
  auto ring = StartRing(1);
  ASSERT_EQ(ring.size(), 1u);
  RingGroupCollective group(ring[0]->ring(), 0, 1);
  std::vector<float> piece(3), room(2);
  EXPECT_EQ(group.AllGather(piece, absl::MakeSpan(room)).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> fits(3);
  EXPECT_TRUE(group.AllGather(std::vector<float>{1, 2, 3},
                              absl::MakeSpan(fits))
                  .ok());
  EXPECT_EQ(fits, (std::vector<float>{1, 2, 3}));
}

// What the ring moves, counted per member: 3 members, so each all-reduce is
// 4 steps of one segment sent and one received. 6 floats cut into segments
// of 2: each member sends 4 * 2 floats (32 bytes) and receives as many; an
// all-gather of pieces of 2 floats is an all-reduce of 6 (32 bytes more).
// 7 floats cut into 3, 2, 2: the members send 2 * (3 - 1) * 7 floats in
// all, and what one sends its right neighbour receives.
TEST(RingGroupCollective, CountsThePayloadBytesTheRingMoves) {
  constexpr int kSize = 3;
  auto ring = StartRing(kSize);
  ASSERT_EQ(ring.size(), size_t{kSize});
  Counter sent[kSize], received[kSize];
  std::vector<int64_t> after_even(kSize), sent_total(kSize),
      received_total(kSize);
  std::vector<absl::Status> errors(kSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      RingGroupCollective group(ring[r]->ring(), r, kSize, /*first_id=*/1,
                                &sent[r], &received[r]);
      std::vector<float> six(6, 1.0f);
      errors[r] = group.AllReduceSum(absl::MakeSpan(six));
      if (!errors[r].ok()) return;
      std::vector<float> piece = {1, 2}, all(6);
      errors[r] = group.AllGather(piece, absl::MakeSpan(all));
      if (!errors[r].ok()) return;
      EXPECT_EQ(group.bytes_sent(), group.bytes_received()) << r;
      after_even[r] = group.bytes_sent();
      std::vector<float> seven(7, 1.0f);
      errors[r] = group.AllReduceSum(absl::MakeSpan(seven));
      sent_total[r] = group.bytes_sent();
      received_total[r] = group.bytes_received();
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t uneven_sent = 0, uneven_received = 0;
  for (int r = 0; r < kSize; ++r) {
    ASSERT_TRUE(errors[r].ok()) << errors[r];
    EXPECT_EQ(after_even[r], 2 * 4 * 2 * 4) << r;
    EXPECT_EQ(sent[r].Value(), sent_total[r]) << r;
    EXPECT_EQ(received[r].Value(), received_total[r]) << r;
    uneven_sent += sent_total[r] - after_even[r];
    uneven_received += received_total[r] - after_even[r];
  }
  EXPECT_EQ(uneven_sent, 2 * (kSize - 1) * 7 * 4);
  EXPECT_EQ(uneven_received, uneven_sent);
  // Member r receives what member r - 1 sends.
  for (int r = 0; r < kSize; ++r) {
    const int left = (r + kSize - 1) % kSize;
    EXPECT_EQ(received_total[r] - after_even[r],
              sent_total[left] - after_even[left])
        << r;
  }
}

TEST(RingGroupCollective, AGroupOfOneMovesNothing) {
  auto ring = StartRing(1);
  ASSERT_EQ(ring.size(), 1u);
  Counter sent, received;
  RingGroupCollective group(ring[0]->ring(), 0, 1, 1, &sent, &received);
  std::vector<float> values(100, 1.0f);
  ASSERT_TRUE(group.AllReduceSum(absl::MakeSpan(values)).ok());
  EXPECT_EQ(group.bytes_sent(), 0);
  EXPECT_EQ(sent.Value(), 0);
  EXPECT_EQ(received.Value(), 0);
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
