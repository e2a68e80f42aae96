#include "data/criteo_hash.h"

#include "common/derived_seed.h"

namespace pstrain {
namespace data {

uint64_t CriteoSparseId(int field, uint64_t value) {
  return SplitMix64(SplitMix64(static_cast<uint64_t>(field)) ^ value);
}

uint64_t CriteoMissingId(int field) {
  return SplitMix64(SplitMix64(static_cast<uint64_t>(field) + 32));
}

}  // namespace data
}  // namespace pstrain
