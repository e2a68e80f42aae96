// CRC32C (Castagnoli), the checksum of every checkpoint slice; the same
// polynomial as LevelDB, RocksDB and iSCSI. Uses the SSE4.2 crc32
// instruction when the CPU has it (several GB/s), a table otherwise.
//
//   uint32_t crc = Crc32c(data, size);
//   crc = Crc32cExtend(crc, more, more_size);  // == Crc32c of both parts
#ifndef PSTRAIN_COMMON_CRC32C_H_
#define PSTRAIN_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace pstrain {

// The CRC32C of `data` continued from `crc` (the CRC32C of what came before).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) {
  return Crc32cExtend(0, data, size);
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CRC32C_H_
