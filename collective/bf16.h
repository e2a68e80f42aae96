// bfloat16, the payload an all-reduce may send instead of float32 to halve
// its bytes (RingAllReduceOptions::dtype).
//
// A bfloat16 is the high 16 bits of a float32: the same sign and 8-bit
// exponent (so the same range), 7 of the 23 fraction bits (about 2-3
// significant decimal digits). FloatToBf16 rounds to nearest, ties to even,
// the rounding TensorFlow, PyTorch and the AVX-512 BF16 instructions use; the
// relative error of one rounding is at most 2^-8 (0.39%). Infinities stay
// infinite, a NaN stays a NaN (made quiet), a float32 too large for bfloat16
// rounds to infinity, as in IEEE arithmetic. Bf16ToFloat is exact.
#ifndef PSTRAIN_COLLECTIVE_BF16_H_
#define PSTRAIN_COLLECTIVE_BF16_H_

#include <cstdint>
#include <cstring>

namespace pstrain {
namespace collective {

// `value` rounded to the nearest bfloat16 (ties to even), as its 16 bits.
inline uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it one, quiet
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Adding 0x7fff rounds the dropped half to nearest; the kept part's lowest
  // bit breaks ties towards even. A carry into the exponent is the right
  // result (the next power of two, or infinity).
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The float32 that bfloat16 `bits` stands for (exact).
inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// `value` rounded to bfloat16 and back.
inline float RoundToBf16(float value) {
  return Bf16ToFloat(FloatToBf16(value));
}

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_BF16_H_
