// The ring over real gRPC: one RingParticipant per rank in this process,
// each with its own server on 127.0.0.1 at a port picked at run time.
#include "collective/ring_participant.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_options.h"
#include "gtest/gtest.h"
#include "proto/collective.grpc.pb.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace collective {
namespace {

std::vector<std::string> Peers(int size) {
  std::vector<std::string> peers;
  for (int i = 0; i < size; ++i) {
    peers.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  return peers;
}

std::vector<std::unique_ptr<RingParticipant>> StartRing(
    const std::vector<std::string>& peers,
    absl::Duration timeout = absl::Seconds(30), int64_t chunk_bytes = 1 << 20,
    const GrpcSecurity& security = GrpcSecurity()) {
  std::vector<std::unique_ptr<RingParticipant>> ring;
  for (int rank = 0; rank < static_cast<int>(peers.size()); ++rank) {
    RingParticipantOptions options;
    options.rank = rank;
    options.peers = peers;
    options.timeout = timeout;
    options.chunk_bytes = chunk_bytes;
    options.security = security;
    auto participant = RingParticipant::Start(options);
    EXPECT_TRUE(participant.ok()) << participant.status();
    if (!participant.ok()) return {};
    ring.push_back(std::move(*participant));
  }
  return ring;
}

// Every participant all-reduces data[rank] at once, each on its thread.
std::vector<absl::Status> AllReduce(
    std::vector<std::unique_ptr<RingParticipant>>& ring, uint64_t id,
    std::vector<std::vector<float>>* data) {
  std::vector<absl::Status> results(ring.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ring.size(); ++r) {
    threads.emplace_back([&, r] {
      results[r] = ring[r]->ring()->AllReduce(id, absl::MakeSpan((*data)[r]));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<std::vector<float>> SmallIntegers(int size, int64_t n) {
  std::vector<std::vector<float>> data(size, std::vector<float>(n));
  for (int r = 0; r < size; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      data[r][i] = static_cast<float>((r * 5 + i) % 11 - 5);
    }
  }
  return data;
}

std::vector<float> SerialSum(const std::vector<std::vector<float>>& data) {
  std::vector<float> sum(data[0].size(), 0.0f);
  for (const auto& d : data) {
    for (size_t i = 0; i < d.size(); ++i) sum[i] += d[i];
  }
  return sum;
}

TEST(RingParticipant, SumsOverGrpcForOneToFiveParticipants) {
  for (int size = 1; size <= 5; ++size) {
    // Chunks of 4 KB: the larger sizes take many pipelined chunks.
    auto ring = StartRing(Peers(size), absl::Seconds(30), 4096);
    ASSERT_EQ(ring.size(), static_cast<size_t>(size));
    uint64_t id = 0;
    for (int64_t n : {1, 3, 4, 1001, 100003}) {
      auto data = SmallIntegers(size, n);
      const std::vector<float> expected = SerialSum(data);
      for (const absl::Status& s : AllReduce(ring, ++id, &data)) {
        ASSERT_TRUE(s.ok()) << s;
      }
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(data[r], expected) << "size " << size << " n " << n
                                     << " rank " << r;
      }
    }
  }
}

TEST(RingParticipant, SixtyFourMegabytesAtTwoAndThree) {
  const int64_t n = (64 << 20) / sizeof(float);
  for (int size : {2, 3}) {
    auto ring = StartRing(Peers(size));
    ASSERT_EQ(ring.size(), static_cast<size_t>(size));
    auto data = SmallIntegers(size, n);
    const std::vector<float> expected = SerialSum(data);
    for (const absl::Status& s : AllReduce(ring, 1, &data)) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < size; ++r) {
      EXPECT_TRUE(data[r] == expected) << "size " << size << " rank " << r;
      EXPECT_EQ(std::memcmp(data[r].data(), data[0].data(), n * sizeof(float)),
                0);
    }
  }
}

TEST(RingParticipant, BucketOfTensorsOverGrpc) {
  auto ring = StartRing(Peers(3), absl::Seconds(30), 64);
  ASSERT_EQ(ring.size(), 3u);
  std::vector<std::vector<float>> a(3, std::vector<float>(7)),
      b(3, std::vector<float>(30));
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 7; ++i) a[r][i] = r + i;
    for (int i = 0; i < 30; ++i) b[r][i] = 10 * r - i;
  }
  const std::vector<float> sum_a = SerialSum(a), sum_b = SerialSum(b);
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::vector<absl::Span<float>> bucket = {absl::MakeSpan(a[r]),
                                               absl::MakeSpan(b[r])};
      results[r] = ring[r]->ring()->AllReduce(1, bucket);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(a[r], sum_a);
    EXPECT_EQ(b[r], sum_b);
  }
}

TEST(RingParticipant, AParticipantKilledMidRingMakesTheOthersFail) {
  const std::vector<std::string> peers = Peers(3);
  auto ring = StartRing(peers, absl::Seconds(2));
  ASSERT_EQ(ring.size(), 3u);
  // A first all-reduce works.
  auto data = SmallIntegers(3, 4 << 20);
  for (const absl::Status& s : AllReduce(ring, 1, &data)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  // In the second, rank 2 never sends: ranks 0 and 1 are mid-ring (rank 1
  // has streamed its first segment to rank 2, rank 0 waits for rank 2)
  // when rank 2's server goes away.
  std::vector<absl::Status> results(2);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      results[r] = ring[r]->ring()->AllReduce(2, absl::MakeSpan(data[r]));
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  ring[2]->Stop(absl::ZeroDuration());  // as if it crashed
  for (auto& t : threads) t.join();
  const absl::Duration took = absl::Now() - start;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(results[r].code() == absl::StatusCode::kDeadlineExceeded ||
                results[r].code() == absl::StatusCode::kUnavailable)
        << results[r];
    EXPECT_TRUE(absl::StrContains(results[r].message(), peers[2]))
        << "rank " << r << ": " << results[r];
  }
  // No hang: the 2 s timeout, its 1 s for telling the neighbour, and
  // plenty of slack for a loaded machine.
  EXPECT_LT(took, absl::Seconds(20));
}

TEST(RingParticipant, ALateStreamIsRefusedOverGrpc) {
  const std::vector<std::string> peers = Peers(3);
  auto ring = StartRing(peers);
  ASSERT_EQ(ring.size(), 3u);
  auto data = SmallIntegers(3, 100);
  for (const absl::Status& s : AllReduce(ring, 3, &data)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  // Rank 2 (rank 0's left neighbour) streams all-reduce 3 again.
  auto stub = RingCollective::NewStub(CreatePstrainChannel(peers[0]));
  grpc::ClientContext context;
  RingAck ack;
  auto writer = stub->SendChunks(&context, &ack);
  RingMessage message;
  RingStreamHeader* header = message.mutable_header();
  header->set_collective_id(3);
  header->set_sender_rank(2);
  header->set_ring_size(3);
  header->set_num_elements(100);
  header->set_chunk_elements(1 << 18);
  header->set_dtype(RING_DTYPE_FLOAT32);
  writer->Write(message);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "all-reduce 3"));
}

TEST(RingParticipant, AuthTokenIsRequiredWhenSet) {
  GrpcSecurity security;
  security.auth_token = "ring-token";
  const std::vector<std::string> peers = Peers(2);
  auto ring = StartRing(peers, absl::Seconds(30), 1 << 20, security);
  ASSERT_EQ(ring.size(), 2u);
  auto data = SmallIntegers(2, 1000);
  const std::vector<float> expected = SerialSum(data);
  for (const absl::Status& s : AllReduce(ring, 1, &data)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(data[1], expected);
  // Without the token: refused before anything is read.
  auto stub = RingCollective::NewStub(CreatePstrainChannel(peers[0]));
  grpc::ClientContext context;
  RingAck ack;
  auto writer = stub->SendChunks(&context, &ack);
  RingMessage message;
  message.mutable_header()->set_collective_id(2);
  writer->Write(message);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace collective
}  // namespace pstrain
