// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011), the counter-based generator of Random123, cuRAND and
// TensorFlow: four random 32-bit words that are a pure function of a 128-bit
// counter and a 64-bit key. Any element of a random stream can be computed
// on its own, in any order and on any machine, which makes dropout masks
// reproducible from (seed, step, position).
//
//   std::array<uint32_t, 4> words = Philox4x32({c0, c1, c2, c3}, {k0, k1});
//
// Its output for the Random123 known-answer vectors is tested; any change to
// it changes every dropout mask.
#ifndef PSTRAIN_COMPUTE_CPU_PHILOX_H_
#define PSTRAIN_COMPUTE_CPU_PHILOX_H_

#include <array>
#include <cstdint>

namespace pstrain {
namespace worker {
namespace cpu {

inline std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter,
                                          std::array<uint32_t, 2> key) {
  constexpr uint64_t kMul0 = 0xD2511F53;
  constexpr uint64_t kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9;
  constexpr uint32_t kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t p0 = kMul0 * counter[0];
    const uint64_t p1 = kMul1 * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0],
               static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1],
               static_cast<uint32_t>(p0)};
  }
  return counter;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_PHILOX_H_
