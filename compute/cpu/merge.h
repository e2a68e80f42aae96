// Keras's merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum)
// and Concatenate, forward and backward, in plain loops over float32.
//
//   MergeForward(MergeOp::kAdd, {a, b}, n, y);          // y = a + b
//   MergeBackward(MergeOp::kAdd, {a, b}, dy, n, 1, db);  // db = dy
//   ConcatForward({a, b}, {3, 5}, rows, y);  // each row: 3 of a, 5 of b
//   ConcatBackward(dy, {3, 5}, rows, 1, db);
//
// Backward computes one input's gradient per call (overwriting it), so a
// caller can route each wherever that input's gradient accumulates.
// Maximum and Minimum pass the gradient to the first input holding the
// extreme value.
#ifndef PSTRAIN_COMPUTE_CPU_MERGE_H_
#define PSTRAIN_COMPUTE_CPU_MERGE_H_

#include <cstdint>

#include "absl/types/span.h"
#include "model/model_spec.h"

namespace pstrain {
namespace worker {
namespace cpu {

// y = op(x[0], x[1], ...) elementwise over n elements each, on up to
// num_threads OpenMP threads (compute/cpu/parallel.h; elementwise, so the
// result does not depend on the count).
void MergeForward(MergeOp op, absl::Span<const float* const> x, int64_t n,
                  float* y, int num_threads = 1);

// dx = d(sum(dy * y)) / d(x[which]), on up to num_threads threads.
void MergeBackward(MergeOp op, absl::Span<const float* const> x,
                   const float* dy, int64_t n, int which, float* dx,
                   int num_threads = 1);

// y = rows of x[0]'s widths[0] elements, then x[1]'s widths[1], ...
void ConcatForward(absl::Span<const float* const> x,
                   absl::Span<const int64_t> widths, int64_t rows, float* y);

// dx = the slice of dy that x[which] filled.
void ConcatBackward(const float* dy, absl::Span<const int64_t> widths,
                    int64_t rows, int which, float* dx);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_MERGE_H_
