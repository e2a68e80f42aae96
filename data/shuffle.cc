#include "data/shuffle.h"

#include <numeric>
#include <random>
#include <utility>

#include "common/derived_seed.h"

namespace pstrain {
namespace data {
namespace {

// Uniform in [0, range), range >= 1: draws below 2^64 mod range are rejected
// so that every residue is equally likely.
uint64_t UniformBelow(std::mt19937_64& gen, uint64_t range) {
  const uint64_t threshold = (0 - range) % range;
  for (;;) {
    const uint64_t r = gen();
    if (r >= threshold) return r % range;
  }
}

}  // namespace

std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  if (n <= 0) return {};
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  // SplitMix64: nearby epochs seed unrelated generator states.
  std::mt19937_64 gen(
      SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(UniformBelow(gen, i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace data
}  // namespace pstrain
