#include "common/crc32c.h"

#include <cstring>

namespace pstrain {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78;  // reflected Castagnoli

struct Table {
  uint32_t entries[256];
  constexpr Table() : entries() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) {
        crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
      }
      entries[i] = crc;
    }
  }
};

constexpr Table kTable;

uint32_t ExtendPortable(uint32_t crc, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    crc = kTable.entries[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  }
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc,
                                                       const unsigned char* p,
                                                       size_t n) {
  uint64_t crc64 = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc64 = __builtin_ia32_crc32di(crc64, word);
    p += 8;
    n -= 8;
  }
  uint32_t crc32 = static_cast<uint32_t>(crc64);
  while (n > 0) {
    crc32 = __builtin_ia32_crc32qi(crc32, *p++);
    --n;
  }
  return crc32;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  crc = HasSse42() ? ExtendSse42(crc, p, size) : ExtendPortable(crc, p, size);
  return ~crc;
}

}  // namespace pstrain
