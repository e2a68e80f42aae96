#include "worker/data/shuffle.h"

#include <numeric>
#include <random>
#include <utility>

namespace pstrain {
namespace data {
namespace {

// SplitMix64's output function: nearby inputs give unrelated outputs, so
// epochs 0, 1, 2 seed unrelated generator states.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

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
