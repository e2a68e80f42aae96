// Parallel loops for our own CPU kernels (batch statistics, merges, pooling),
// on the same OpenMP runtime (GNU libgomp) that Debian's oneDNN runs its
// primitives on, so that both share one thread team and `--threads` drives
// both. No threads are started per call: libgomp keeps its team between
// parallel regions.
//
// Work over [0, n) is cut into chunks of `chunk` items (the last may be
// shorter) and chunk k always covers the same items, whatever the thread
// count. A reduction that writes one partial result per chunk and then sums
// the partials in chunk order is therefore bitwise the same on 1 thread and
// on 8, and from run to run:
//
//   const int64_t chunks = NumChunks(rows, kRows);
//   std::vector<double> partial(chunks);
//   ParallelChunks(num_threads, rows, kRows,
//                  [&](int64_t k, int64_t begin, int64_t end) {
//                    for (int64_t r = begin; r < end; ++r) partial[k] += x[r];
//                  });
//   double sum = 0;
//   for (double p : partial) sum += p;  // Fixed order.
//
// Calls with a single chunk, or num_threads <= 1, run on the calling thread.
// fn must not throw and must be safe to run on chunks concurrently.
#ifndef PSTRAIN_COMPUTE_CPU_PARALLEL_H_
#define PSTRAIN_COMPUTE_CPU_PARALLEL_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace pstrain {
namespace worker {
namespace cpu {

// The number of chunks of `chunk` items (chunk >= 1) that cover n items.
int64_t NumChunks(int64_t n, int64_t chunk);

// Runs fn(k, begin, end) for every chunk k of [0, n), on up to num_threads
// OpenMP threads; returns when all have run.
void ParallelChunks(
    int num_threads, int64_t n, int64_t chunk,
    absl::FunctionRef<void(int64_t k, int64_t begin, int64_t end)> fn);

// Elementwise work: fn(begin, end) over [0, n) in chunks big enough to
// amortize a parallel region (16 Ki items), on up to num_threads threads.
void ParallelFor(int num_threads, int64_t n,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_PARALLEL_H_
