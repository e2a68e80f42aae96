#include "common/derived_seed.h"

namespace pstrain {

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

uint64_t DeriveSeed(uint64_t run_seed, absl::string_view label) {
  return SplitMix64(SplitMix64(run_seed) ^ Fnv1a64(label));
}

}  // namespace pstrain
