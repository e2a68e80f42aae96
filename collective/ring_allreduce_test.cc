// The ring's logic with an in-memory transport: each participant's stream
// calls its right neighbour's Accept/Deliver/Close directly. The gRPC path
// is ring_participant_test's.
#include "collective/ring_allreduce.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "collective/bf16.h"
#include "collective/discarding_transport.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace collective {
namespace {

class InMemoryStream : public RingStream {
 public:
  // `split` > 0: each payload is delivered in pieces of that many bytes.
  InMemoryStream(RingAllReduce* right, int split)
      : right_(right), split_(split) {}
  absl::Status Start(const RingStreamHeader& header) override {
    if (cancelled_) return absl::CancelledError("cancelled");
    id_ = header.collective_id();
    status_ = right_->Accept(header);
    started_ = status_.ok();
    return status_;
  }
  absl::Status Write(int step, int index, absl::string_view payload) override {
    if (cancelled_) return absl::CancelledError("cancelled");
    if (status_.ok() && split_ > 0) {
      std::vector<absl::string_view> pieces;
      for (size_t at = 0; at < payload.size(); at += split_) {
        pieces.push_back(payload.substr(at, split_));
      }
      status_ = right_->Deliver(id_, step, index, pieces);
    } else if (status_.ok()) {
      status_ = right_->Deliver(id_, step, index, payload);
    }
    return status_;
  }
  absl::Status Finish(absl::string_view abort_reason) override {
    if (started_) right_->Close(id_, abort_reason);
    return cancelled_ ? absl::CancelledError("cancelled") : status_;
  }
  void Cancel() override { cancelled_ = true; }

 private:
  RingAllReduce* const right_;
  const int split_;
  uint64_t id_ = 0;
  bool started_ = false;
  absl::Status status_;
  std::atomic<bool> cancelled_{false};
};

class InMemoryTransport : public RingTransport {
 public:
  RingAllReduce* right = nullptr;
  int split = 0;
  std::unique_ptr<RingStream> NewStream() override {
    return std::make_unique<InMemoryStream>(right, split);
  }
};

// A ring of `size` in-memory participants.
struct Ring {
  explicit Ring(int size, int64_t chunk_bytes = 64,
                RingDtype dtype = RING_DTYPE_FLOAT32,
                absl::Duration timeout = absl::Seconds(20)) {
    transports.resize(size);
    for (int rank = 0; rank < size; ++rank) {
      RingAllReduceOptions options;
      options.rank = rank;
      options.size = size;
      options.chunk_bytes = chunk_bytes;
      options.dtype = dtype;
      options.timeout = timeout;
      transports[rank] = std::make_unique<InMemoryTransport>();
      auto ring = RingAllReduce::Create(options, transports[rank].get());
      EXPECT_TRUE(ring.ok()) << ring.status();
      rings.push_back(std::move(*ring));
    }
    for (int rank = 0; rank < size; ++rank) {
      transports[rank]->right = rings[(rank + 1) % size].get();
    }
  }

  // Each participant all-reduces data[rank] on a thread of its own.
  std::vector<absl::Status> AllReduce(uint64_t id,
                                      std::vector<std::vector<float>>* data) {
    std::vector<absl::Status> results(rings.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < rings.size(); ++r) {
      threads.emplace_back([&, r] {
        results[r] = rings[r]->AllReduce(id, absl::MakeSpan((*data)[r]));
      });
    }
    for (auto& t : threads) t.join();
    return results;
  }

  std::vector<std::unique_ptr<InMemoryTransport>> transports;
  std::vector<std::unique_ptr<RingAllReduce>> rings;
};

// Small integers: every partial sum is exact in float32.
std::vector<std::vector<float>> SmallIntegers(int size, int64_t n) {
  std::vector<std::vector<float>> data(size, std::vector<float>(n));
  for (int r = 0; r < size; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      data[r][i] = static_cast<float>((r * 7 + i * 3) % 17 - 8);
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

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(RingAllReduce, SumsSmallIntegersExactlyForOneToFiveParticipants) {
  for (int size = 1; size <= 5; ++size) {
    // Sizes below, at and above the ring size, not divisible by it, and
    // segments of many 16-element chunks.
    for (int64_t n : {1, 2, 3, 4, 5, 7, 16, 97, 1000, 4099}) {
      Ring ring(size);
      auto data = SmallIntegers(size, n);
      const std::vector<float> expected = SerialSum(data);
      for (const absl::Status& s : ring.AllReduce(1, &data)) {
        ASSERT_TRUE(s.ok()) << s;
      }
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(data[r], expected) << "size " << size << " n " << n
                                     << " rank " << r;
      }
    }
  }
}

TEST(RingAllReduce, RandomFloatsAreWithinRoundingAndBitIdentical) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int size = 2; size <= 5; ++size) {
    Ring ring(size, /*chunk_bytes=*/256);
    std::vector<std::vector<float>> data(size, std::vector<float>(3001));
    for (auto& d : data) {
      for (float& x : d) x = normal(rng);
    }
    const std::vector<float> expected = SerialSum(data);
    for (const absl::Status& s : ring.AllReduce(1, &data)) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < size; ++r) {
      EXPECT_TRUE(BitIdentical(data[r], data[0])) << "rank " << r;
      for (size_t i = 0; i < expected.size(); ++i) {
        // `size` terms of magnitude ~4 at most: a few ulps of 16.
        ASSERT_NEAR(data[r][i], expected[i], 1e-5f) << i;
      }
    }
  }
}

TEST(RingAllReduce, SeveralAllReducesInARowWithIncreasingIds) {
  Ring ring(3);
  for (uint64_t id : {1, 2, 5, 6}) {
    auto data = SmallIntegers(3, 50 + id);
    const std::vector<float> expected = SerialSum(data);
    for (const absl::Status& s : ring.AllReduce(id, &data)) {
      ASSERT_TRUE(s.ok()) << s;
    }
    EXPECT_EQ(data[2], expected);
  }
}

TEST(RingAllReduce, BucketOfTensorsIsReducedAsOneFlatBuffer) {
  const int size = 3;
  Ring ring(size);
  const std::vector<int64_t> shapes = {5, 0, 1, 130, 17};
  // tensors[rank][t]
  std::vector<std::vector<std::vector<float>>> tensors(size);
  for (int r = 0; r < size; ++r) {
    for (size_t t = 0; t < shapes.size(); ++t) {
      std::vector<float> v(shapes[t]);
      for (int64_t i = 0; i < shapes[t]; ++i) {
        v[i] = static_cast<float>(r * 100 + t * 10 + i % 10);
      }
      tensors[r].push_back(v);
    }
  }
  std::vector<absl::Status> results(size);
  std::vector<std::thread> threads;
  auto original = tensors;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::vector<absl::Span<float>> spans;
      for (auto& t : tensors[r]) spans.push_back(absl::MakeSpan(t));
      results[r] = ring.rings[r]->AllReduce(7, spans);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r];
    for (size_t t = 0; t < shapes.size(); ++t) {
      for (int64_t i = 0; i < shapes[t]; ++i) {
        float expected = 0;
        for (int q = 0; q < size; ++q) expected += original[q][t][i];
        EXPECT_EQ(tensors[r][t][i], expected)
            << "rank " << r << " tensor " << t << " element " << i;
      }
    }
  }
}

TEST(RingAllReduce, Bfloat16PayloadIsCloseAndBitIdenticalAcrossReplicas) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  for (int size = 2; size <= 4; ++size) {
    Ring ring(size, /*chunk_bytes=*/64, RING_DTYPE_BFLOAT16);
    std::vector<std::vector<float>> data(size, std::vector<float>(513));
    for (auto& d : data) {
      for (float& x : d) x = uniform(rng);
    }
    const std::vector<float> expected = SerialSum(data);
    for (const absl::Status& s : ring.AllReduce(1, &data)) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < size; ++r) {
      EXPECT_TRUE(BitIdentical(data[r], data[0])) << "rank " << r;
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      // Every value is a bfloat16, and (positive terms) within `size`
      // roundings of 2^-8 each.
      EXPECT_EQ(RoundToBf16(data[0][i]), data[0][i]);
      EXPECT_NEAR(data[0][i], expected[i], expected[i] * size / 256.0f) << i;
    }
    // Small integers are bfloat16 values and sum exactly.
    auto ints = SmallIntegers(size, 100);
    const std::vector<float> int_sum = SerialSum(ints);
    for (const absl::Status& s : ring.AllReduce(2, &ints)) {
      ASSERT_TRUE(s.ok()) << s;
    }
    EXPECT_EQ(ints[size - 1], int_sum);
  }
}

TEST(RingAllReduce, SetDtypeSwitchesTheNextAllReducesPayload) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  Ring ring(3);  // created float32
  for (auto& r : ring.rings) ASSERT_TRUE(r->SetDtype(RING_DTYPE_BFLOAT16).ok());
  std::vector<std::vector<float>> data(3, std::vector<float>(301));
  for (auto& d : data) {
    for (float& x : d) x = uniform(rng);
  }
  const std::vector<float> expected = SerialSum(data);
  for (const absl::Status& s : ring.AllReduce(1, &data)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  // bfloat16 went round: every value is one, not the float32 sum.
  int differs = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(RoundToBf16(data[0][i]), data[0][i]) << i;
    EXPECT_NEAR(data[0][i], expected[i], expected[i] * 3 / 256.0f) << i;
    differs += data[0][i] != expected[i];
  }
  EXPECT_GT(differs, 0);
  // Back to float32: the random sums are no longer all bfloat16 values.
  for (auto& r : ring.rings) ASSERT_TRUE(r->SetDtype(RING_DTYPE_FLOAT32).ok());
  for (auto& d : data) {
    for (float& x : d) x = uniform(rng);
  }
  for (const absl::Status& s : ring.AllReduce(2, &data)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  int not_bf16 = 0;
  for (float x : data[0]) not_bf16 += RoundToBf16(x) != x;
  EXPECT_GT(not_bf16, 0);
  EXPECT_EQ(ring.rings[0]->SetDtype(RingDtype(7)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RingAllReduce, ParticipantsOfDifferentDtypesFailClearly) {
  Ring ring(2);
  ASSERT_TRUE(ring.rings[1]->SetDtype(RING_DTYPE_BFLOAT16).ok());
  std::vector<std::vector<float>> data(2, std::vector<float>(16, 1.0f));
  for (const absl::Status& s : ring.AllReduce(1, &data)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "RING_DTYPE_BFLOAT16")) << s;
  }
}

TEST(RingAllReduce, PayloadsSplitAnywhereSumTheSame) {
  // gRPC hands a message over in slices that may split an element.
  for (RingDtype dtype : {RING_DTYPE_FLOAT32, RING_DTYPE_BFLOAT16}) {
    for (int split : {1, 3, 5, 64}) {
      Ring ring(3, /*chunk_bytes=*/256, dtype);
      for (auto& transport : ring.transports) transport->split = split;
      auto data = SmallIntegers(3, 1001);
      const std::vector<float> expected = SerialSum(data);
      for (const absl::Status& s : ring.AllReduce(1, &data)) {
        ASSERT_TRUE(s.ok()) << s;
      }
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(data[r], expected)
            << RingDtype_Name(dtype) << " split " << split << " rank " << r;
      }
    }
  }
}

TEST(RingAllReduce, RefusesAStreamOrChunkOfAnAllReduceThatIsOver) {
  Ring ring(2);
  auto data = SmallIntegers(2, 10);
  for (const absl::Status& s : ring.AllReduce(4, &data)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  RingStreamHeader header;
  header.set_collective_id(4);
  header.set_sender_rank(1);
  header.set_ring_size(2);
  header.set_num_elements(10);
  header.set_chunk_elements(16);
  header.set_dtype(RING_DTYPE_FLOAT32);
  absl::Status late = ring.rings[0]->Accept(header);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_EQ(ring.rings[0]->Deliver(4, 0, 0, std::string(20, '\0')).code(),
            absl::StatusCode::kFailedPrecondition);
  header.set_collective_id(3);
  EXPECT_EQ(ring.rings[0]->Accept(header).code(),
            absl::StatusCode::kFailedPrecondition);
  // A later one is held until it starts; a second stream of it is refused.
  header.set_collective_id(9);
  EXPECT_TRUE(ring.rings[0]->Accept(header).ok());
  EXPECT_EQ(ring.rings[0]->Accept(header).code(),
            absl::StatusCode::kAlreadyExists);
  // Not the left neighbour's, or malformed chunks.
  header.set_collective_id(10);
  header.set_sender_rank(0);
  EXPECT_EQ(ring.rings[0]->Accept(header).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.rings[0]->Deliver(9, 2, 0, std::string(20, '\0')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.rings[0]->Deliver(9, 0, 0, std::string(7, '\0')).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RingAllReduce, ALateChunkOfAnAbortedRoundIsNotSummed) {
  // Rank 0 gives up all-reduce 1 (rank 1 never joins it) and goes on to 2;
  // rank 1's stream of 1 arriving then is refused, and 2 sums correctly.
  Ring ring(2, 64, RING_DTYPE_FLOAT32, absl::Milliseconds(200));
  std::vector<float> lonely(10, 1.0f);
  absl::Status first = ring.rings[0]->AllReduce(1, absl::MakeSpan(lonely));
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  std::vector<float> stale(10, 1000.0f);
  // Rank 1's all-reduce 1, late: rank 0 refuses its stream (or rank 1
  // first reads rank 0's abort of it, held for it); nothing is summed.
  absl::Status late = ring.rings[1]->AllReduce(1, absl::MakeSpan(stale));
  EXPECT_FALSE(late.ok());
  EXPECT_TRUE(absl::StrContains(late.message(), "over") ||
              absl::StrContains(late.message(), "gave up"))
      << late;
  EXPECT_EQ(lonely, std::vector<float>(10, 1.0f));
  auto data = SmallIntegers(2, 10);
  const std::vector<float> expected = SerialSum(data);
  for (const absl::Status& s : ring.AllReduce(2, &data)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(data[0], expected);
  EXPECT_EQ(data[1], expected);
}

TEST(RingAllReduce, AbsentLeftNeighbourIsADeadlineNamingIt) {
  Ring ring(2, 64, RING_DTYPE_FLOAT32, absl::Milliseconds(200));
  std::vector<float> data(10, 1.0f);
  absl::Status status = ring.rings[0]->AllReduce(1, absl::MakeSpan(data));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "rank 1")) << status;
}

TEST(RingAllReduce, AFailureGoesRoundTheRingWithItsReason) {
  // Rank 2 never joins. Rank 0 (its right neighbour) times out waiting for
  // it; rank 1, with a longer timeout, learns why from rank 0.
  std::vector<std::unique_ptr<InMemoryTransport>> transports;
  std::vector<std::unique_ptr<RingAllReduce>> rings;
  for (int rank = 0; rank < 3; ++rank) {
    RingAllReduceOptions options;
    options.rank = rank;
    options.size = 3;
    options.peer_names = {"a:1", "b:2", "c:3"};
    options.chunk_bytes = 64;
    options.timeout = rank == 0 ? absl::Milliseconds(200) : absl::Seconds(30);
    transports.push_back(std::make_unique<InMemoryTransport>());
    rings.push_back(*RingAllReduce::Create(options, transports.back().get()));
  }
  for (int rank = 0; rank < 3; ++rank) {
    transports[rank]->right = rings[(rank + 1) % 3].get();
  }
  std::vector<float> a(100, 1.0f), b(100, 2.0f);
  absl::Status status_a, status_b;
  std::thread t([&] { status_b = rings[1]->AllReduce(1, absl::MakeSpan(b)); });
  status_a = rings[0]->AllReduce(1, absl::MakeSpan(a));
  t.join();
  EXPECT_EQ(status_a.code(), absl::StatusCode::kDeadlineExceeded) << status_a;
  EXPECT_TRUE(absl::StrContains(status_a.message(), "rank 2 (c:3)"));
  EXPECT_EQ(status_b.code(), absl::StatusCode::kUnavailable) << status_b;
  EXPECT_TRUE(absl::StrContains(status_b.message(), "gave up")) << status_b;
  EXPECT_TRUE(absl::StrContains(status_b.message(), "rank 2 (c:3)"))
      << status_b;
}

TEST(RingAllReduce, AnAbortAfterTheLastChunkExplainsTheNextSilence) {
  // Rank 1 finished all-reduce 1 before rank 0, its left neighbour, gave it
  // up (rank 0's left neighbour died in its last step). When rank 0 is then
  // silent in all-reduce 2, rank 1 says why rank 0 gave up.
  RingAllReduceOptions options;
  options.rank = 1;
  options.size = 3;
  options.peer_names = {"a:1", "b:2", "c:3"};
  options.timeout = absl::Milliseconds(200);
  DiscardingTransport transport;
  auto ring = RingAllReduce::Create(options, &transport);
  ASSERT_TRUE(ring.ok()) << ring.status();
  std::vector<float> data(10, 1.0f);
  // No left neighbour for all-reduce 1 either; then its abort comes.
  EXPECT_FALSE((*ring)->AllReduce(1, absl::MakeSpan(data)).ok());
  (*ring)->Close(1, "rank 0 (a:1): the stream from rank 2 (c:3) broke off");
  absl::Status silent = (*ring)->AllReduce(2, absl::MakeSpan(data));
  EXPECT_EQ(silent.code(), absl::StatusCode::kDeadlineExceeded) << silent;
  EXPECT_TRUE(absl::StrContains(silent.message(),
                                "given up on all-reduce 1: rank 0 (a:1): the "
                                "stream from rank 2 (c:3) broke off"))
      << silent;
}

TEST(RingAllReduce, DifferentLayoutsAreRefusedOnBothSides) {
  Ring ring(2);
  std::vector<std::vector<float>> data = {std::vector<float>(10),
                                          std::vector<float>(12)};
  for (const absl::Status& s : ring.AllReduce(1, &data)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "10")) << s;
  }
}

TEST(RingAllReduce, IdsMustIncrease) {
  Ring ring(1);
  std::vector<float> data(3, 1.0f);
  EXPECT_EQ(ring.rings[0]->AllReduce(0, absl::MakeSpan(data)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ring.rings[0]->AllReduce(5, absl::MakeSpan(data)).ok());
  EXPECT_EQ(data, std::vector<float>(3, 1.0f));
  EXPECT_EQ(ring.rings[0]->AllReduce(5, absl::MakeSpan(data)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RingAllReduce, ShutdownCancelsTheRunningAllReduceAndLaterOnes) {
  Ring ring(2);
  std::vector<float> data(100, 1.0f);
  absl::Status status;
  std::thread t(
      [&] { status = ring.rings[0]->AllReduce(1, absl::MakeSpan(data)); });
  ring.rings[0]->Shutdown();
  t.join();
  // Shut down before or while it ran.
  EXPECT_TRUE(status.code() == absl::StatusCode::kCancelled ||
              status.code() == absl::StatusCode::kFailedPrecondition)
      << status;
  EXPECT_EQ(ring.rings[0]->AllReduce(2, absl::MakeSpan(data)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RingAllReduce, CreateRefusesBadOptionsNamingThem) {
  InMemoryTransport transport;
  RingAllReduceOptions options;
  options.size = 3;
  options.rank = 3;
  auto ring = RingAllReduce::Create(options, &transport);
  EXPECT_EQ(ring.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ring.status().message(), "rank 3"));
  options.rank = 0;
  options.chunk_bytes = 2;
  EXPECT_TRUE(absl::StrContains(
      RingAllReduce::Create(options, &transport).status().message(), "chunk"));
  options.chunk_bytes = 1024;
  options.timeout = absl::ZeroDuration();
  EXPECT_TRUE(absl::StrContains(
      RingAllReduce::Create(options, &transport).status().message(),
      "timeout"));
}

}  // namespace
}  // namespace collective
}  // namespace pstrain
