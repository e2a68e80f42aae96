// Initial values of variables, as Keras's initializers define them, made so
// that any row range of a variable can be filled on its own: row r's values
// depend only on the initializer (its seed included), the variable's shape
// and r (for every kind but orthogonal, only on the seed and r). A variable
// split over several ps tasks (or re-split after a restore) therefore starts
// with exactly the values it would have whole, and an embedding row created
// on first touch gets the same values on whichever ps holds it.
//
//   PSTRAIN_RETURN_IF_ERROR(CheckInitializer(def));
//   FillRows(def, /*row_begin=*/100, /*num_rows=*/50, out);  // 50 rows
#ifndef PSTRAIN_PS_INITIALIZER_H_
#define PSTRAIN_PS_INITIALIZER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace ps {

// OK if `def.initializer()` can be used for `def`: a kind is set, its
// parameters are finite and in range (minval < maxval; stddev > 0; scale > 0
// with a mode and a distribution set), and the kind fits the variable
// (orthogonal: rank >= 2; identity: rank 2; neither for a sparse variable).
// INVALID_ARGUMENT naming the variable and field otherwise.
absl::Status CheckInitializer(const VariableDef& def);

// Writes rows [row_begin, row_begin + num_rows) of `def` into `out`, which
// holds num_rows * (elements per row) floats. Fans come from the full shape
// (Keras's rule: for a kernel [..., in, out], fan_in = in * the receptive
// field, fan_out = out * the receptive field). Orthogonal computes the whole
// matrix (a QR factorization, O(rows * cols * min(rows, cols)) time and
// 2 * rows * cols doubles of memory) on every call and copies the rows asked
// for: meant for dense kernels, filled once per slice.
// REQUIRES: CheckInitializer(def).ok().
void FillRows(const VariableDef& def, int64_t row_begin, int64_t num_rows,
              float* out);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_INITIALIZER_H_
