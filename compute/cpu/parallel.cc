#include "compute/cpu/parallel.h"

#include <algorithm>

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Items per chunk of elementwise work: a few microseconds of a simple loop,
// enough that a parallel region (about a microsecond with a warm team) is
// cheap beside it.
constexpr int64_t kElementwiseChunk = 16 * 1024;

}  // namespace

int64_t NumChunks(int64_t n, int64_t chunk) {
  if (n <= 0) return 0;
  chunk = std::max<int64_t>(chunk, 1);
  return (n + chunk - 1) / chunk;
}

void ParallelChunks(
    int num_threads, int64_t n, int64_t chunk,
    absl::FunctionRef<void(int64_t k, int64_t begin, int64_t end)> fn) {
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t chunks = NumChunks(n, chunk);
  auto run = [&](int64_t k) {
    const int64_t begin = k * chunk;
    fn(k, begin, std::min(n, begin + chunk));
  };
  const int threads =
      static_cast<int>(std::min<int64_t>(std::max(num_threads, 1), chunks));
  if (threads <= 1) {
    for (int64_t k = 0; k < chunks; ++k) run(k);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t k = 0; k < chunks; ++k) run(k);
}

void ParallelFor(int num_threads, int64_t n,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn) {
  // Even shares per thread, each at least kElementwiseChunk items.
  const int64_t threads = std::max(num_threads, 1);
  const int64_t share =
      std::max(kElementwiseChunk, (n + threads - 1) / threads);
  ParallelChunks(num_threads, n, share,
                 [&](int64_t, int64_t begin, int64_t end) { fn(begin, end); });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
