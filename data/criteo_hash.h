// The 64-bit ids of Criteo categorical values: what an embedding table on
// the ps is keyed by.
//
// A Criteo categorical value is a hex number (the data sets' values are 32-bit
// hashes written as 8 lowercase hex digits); criteo_line.h parses it to a
// uint64 v, so "0a", "0A" and "000a" are one value. Its id folds in the field,
// so that the same value in C3 and in C7 gets unrelated ids and all 26 fields
// can share one id space:
//
//   CriteoSparseId(f, v)  = SplitMix64(SplitMix64(f) ^ v)          f = 1..26
//   CriteoMissingId(f)    = SplitMix64(SplitMix64(f + 32))
//
// with SplitMix64 as common/derived_seed.h defines it. Within one field the
// map v -> id is a bijection (no two values of a field share an id); the
// missing id of field f equals the id of exactly one 64-bit value of f (one
// pseudo-random number, not a small or all-ones one). Ids are part of the
// checkpoint contract (a table's rows are stored by id): changing these
// formulas orphans every stored row. criteo_hash_test checks them against
// values computed independently in Python.
#ifndef PSTRAIN_DATA_CRITEO_HASH_H_
#define PSTRAIN_DATA_CRITEO_HASH_H_

#include <cstdint>

namespace pstrain {
namespace data {

// The id of the value `value` of categorical field C`field`.
// REQUIRES: 1 <= field <= 26.
uint64_t CriteoSparseId(int field, uint64_t value);

// The id of an empty value of C`field`. REQUIRES: 1 <= field <= 26.
uint64_t CriteoMissingId(int field);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_HASH_H_
