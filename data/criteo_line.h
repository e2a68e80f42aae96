// One line of the Criteo display-advertising format (the Criteo Kaggle and
// Terabyte data sets), parsed into what a model is fed.
//
// A line has 40 tab-separated columns: the label (0 or 1), 13 integer
// features I1..I13 and 26 categorical features C1..C26. Any feature may be
// empty (missing); the label may not.
//   - I_j: a decimal int64, optionally negative (no '+', no spaces). The
//     model gets log(1 + max(x, 0)) as float32; a missing value gets 0.
//   - C_k: a hex number of at most 16 significant digits, either case,
//     leading zeros allowed ("0a", "0A", "000a" are one value). The model
//     gets CriteoSparseId(k, value), or CriteoMissingId(k) when it is empty
//     (criteo_hash.h).
// One '\r' at the end (a CRLF line ending) is dropped. Anything else is
// malformed: INVALID_ARGUMENT naming the column ("column 7 (I6): '1.5' is not
// an integer"); the caller adds the file and line.
//
//   float label, dense[kCriteoDense];
//   uint64_t sparse[kCriteoSparse];
//   PSTRAIN_RETURN_IF_ERROR(ParseCriteoLine(line, &label, dense, sparse));
#ifndef PSTRAIN_DATA_CRITEO_LINE_H_
#define PSTRAIN_DATA_CRITEO_LINE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace data {

inline constexpr int kCriteoDense = 13;    // I1..I13
inline constexpr int kCriteoSparse = 26;   // C1..C26
inline constexpr int kCriteoColumns = 40;  // label, I1..I13, C1..C26

// Parses `line` (without its '\n') into `*label`, dense[0..12] and
// sparse[0..25]. On error their contents are unspecified.
absl::Status ParseCriteoLine(absl::string_view line, float* label, float* dense,
                             uint64_t* sparse);

// log(1 + max(x, 0)) as float32: the value a model gets for integer x.
float CriteoDenseValue(int64_t x);

// The hex number `text` (see above), or false when it is not one.
bool ParseCriteoHex(absl::string_view text, uint64_t* value);

// "label", "I1".."I13", "C1".."C26" for columns 0..39.
std::string CriteoColumnName(int column);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_LINE_H_
