// A fixed set of threads running scheduled closures in FIFO order.
//
//   ThreadPool pool(4);
//   pool.Schedule([] { ... });
//
// The destructor runs every closure already scheduled, then joins. Schedule
// is thread-safe; a closure may schedule more work.
#ifndef PSTRAIN_COMMON_THREAD_POOL_H_
#define PSTRAIN_COMMON_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_THREAD_POOL_H_
