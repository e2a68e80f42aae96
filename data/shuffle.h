// The order in which one epoch visits a dataset: a permutation of [0, n) that
// depends only on (seed, epoch), the same on every machine and compiler, so
// every worker of a run derives the same order without talking to the others.
//
//   std::vector<int64_t> order = EpochPermutation(60000, run_seed, epoch);
//
// std::shuffle and std::uniform_int_distribution are implementation-defined
// (libstdc++ and libc++ give different orders), so this uses std::mt19937_64,
// whose output the C++ standard fixes, seeded by SplitMix64 of seed and epoch,
// and its own Fisher-Yates with unbiased bounded draws.
#ifndef PSTRAIN_DATA_SHUFFLE_H_
#define PSTRAIN_DATA_SHUFFLE_H_

#include <cstdint>
#include <vector>

namespace pstrain {
namespace data {

// A uniformly random permutation of 0..n-1 for (seed, epoch); empty for
// n <= 0. Any change to its output is a breaking change: runs resumed from a
// checkpoint would visit different examples.
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_SHUFFLE_H_
