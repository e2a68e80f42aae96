#include "compute/cpu/parallel.h"

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

TEST(NumChunks, CoversEveryItem) {
  EXPECT_EQ(NumChunks(0, 4), 0);
  EXPECT_EQ(NumChunks(1, 4), 1);
  EXPECT_EQ(NumChunks(8, 4), 2);
  EXPECT_EQ(NumChunks(9, 4), 3);
  EXPECT_EQ(NumChunks(5, 0), 5);  // A chunk holds at least one item.
}

// Every chunk runs once, with the bounds of its index, whatever the thread
// count.
TEST(ParallelChunks, RunsEachChunkOnceWithFixedBounds) {
  for (int threads : {1, 2, 3, 8}) {
    const int64_t n = 1003, chunk = 100;
    std::vector<int> calls(NumChunks(n, chunk), 0);
    std::vector<int64_t> begins(calls.size()), ends(calls.size());
    ParallelChunks(threads, n, chunk, [&](int64_t k, int64_t b, int64_t e) {
      ++calls[k];  // Each k is written by one call only.
      begins[k] = b;
      ends[k] = e;
    });
    for (size_t k = 0; k < calls.size(); ++k) {
      EXPECT_EQ(calls[k], 1) << "threads " << threads << " chunk " << k;
      EXPECT_EQ(begins[k], static_cast<int64_t>(k) * chunk);
      EXPECT_EQ(ends[k], std::min<int64_t>(n, (k + 1) * chunk));
    }
  }
}

// With several threads the chunks really spread over the OpenMP team.
TEST(ParallelChunks, UsesTheRequestedThreads) {
  std::vector<int> thread_of(64, -1);
  ParallelChunks(2, 64, 1, [&](int64_t k, int64_t, int64_t) {
    thread_of[k] = omp_get_thread_num();
  });
  // Static schedule: the first half on thread 0, the second on thread 1.
  EXPECT_EQ(thread_of.front(), 0);
  EXPECT_EQ(thread_of.back(), 1);
}

TEST(ParallelChunks, OneThreadRunsOnTheCaller) {
  std::vector<int> thread_of(8, -1);
  std::vector<int> team(8, 0);
  ParallelChunks(1, 8, 1, [&](int64_t k, int64_t, int64_t) {
    thread_of[k] = omp_get_thread_num();
    team[k] = omp_in_parallel();
  });
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(thread_of[k], 0);
    EXPECT_EQ(team[k], 0) << "a parallel region for one thread";
  }
}

// A per-chunk reduction summed in chunk order gives the same bits on any
// thread count (the property batch statistics rely on).
TEST(ParallelChunks, ChunkOrderedReductionIsThreadCountIndependent) {
  const int64_t n = 100000, chunk = 977;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + i % 97) - 0.013f * i;
  auto sum = [&](int threads) {
    std::vector<float> partial(NumChunks(n, chunk), 0.0f);
    ParallelChunks(threads, n, chunk, [&](int64_t k, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) partial[k] += x[i];
    });
    float total = 0;
    for (float p : partial) total += p;
    return total;
  };
  const float one = sum(1);
  for (int threads : {2, 3, 4}) EXPECT_EQ(sum(threads), one) << threads;
}

TEST(ParallelFor, CoversEachItemOnce) {
  for (int threads : {1, 2, 4}) {
    for (int64_t n : {0, 1, 5000, 100001}) {
      std::vector<std::atomic<int>> hits(n);
      ParallelFor(threads, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
      }
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
