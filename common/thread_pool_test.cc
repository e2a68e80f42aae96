#include "common/thread_pool.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/barrier.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ThreadPool, RunsEveryClosureOnItsThreads) {
  std::atomic<int> sum{0};
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  {
    ThreadPool pool(3);
    // Three closures that wait for each other must run on three threads.
    auto* barrier = new absl::Barrier(3);
    for (int i = 0; i < 3; ++i) {
      pool.Schedule([&, barrier] {
        if (barrier->Block()) delete barrier;
        absl::MutexLock lock(&mu);
        ids.insert(std::this_thread::get_id());
      });
    }
    for (int i = 1; i <= 100; ++i) pool.Schedule([&sum, i] { sum += i; });
  }
  EXPECT_EQ(sum.load(), 5050);
  EXPECT_EQ(ids.size(), 3u);
}

TEST(ThreadPool, DestructorRunsWorkScheduledByWork) {
  std::atomic<int> runs{0};
  {
    ThreadPool pool(1);
    pool.Schedule([&] {
      ++runs;
      pool.Schedule([&] { ++runs; });
    });
  }
  EXPECT_EQ(runs.load(), 2);
}

}  // namespace
}  // namespace pstrain
