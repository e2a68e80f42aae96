// Seeds derived from the run seed, so that one number given to the chief
// fixes every random stream of a run (variable initializers, dropout masks)
// on every machine, and two streams never share a seed by accident.
//
//   Initializer init;
//   init.set_seed(DeriveSeed(run_seed, "conv2d/kernel"));
//
// The derivation is part of the checkpoint contract: a run restored on
// another machine or build must derive the same seeds, so it uses only
// fixed-width arithmetic (never std::hash, whose values differ between
// standard libraries). Changing it changes every initial value.
#ifndef PSTRAIN_COMMON_DERIVED_SEED_H_
#define PSTRAIN_COMMON_DERIVED_SEED_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace pstrain {

// Steele, Lea and Flood's SplitMix64 output function (golden-ratio increment
// 0x9e3779b97f4a7c15, then the two xor-shift-multiply rounds): a bijection
// of 64-bit integers under which nearby inputs give unrelated outputs.
// Inline: the Criteo reader hashes every categorical value with it.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a of `bytes` (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3).
uint64_t Fnv1a64(absl::string_view bytes);

// The seed of the stream named `label` (a variable path such as
// "dense_1/kernel") in the run seeded `run_seed`:
//   SplitMix64(SplitMix64(run_seed) ^ Fnv1a64(label))
// where SplitMix64 is Steele et al.'s finalizer with its golden-ratio
// increment. For a fixed run seed, distinct labels get distinct seeds unless
// their FNV-1a hashes collide.
uint64_t DeriveSeed(uint64_t run_seed, absl::string_view label);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DERIVED_SEED_H_
