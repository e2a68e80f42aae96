// Copies between a whole variable and a member's part of it
// (tensor_parallel_plan.h's MemberVariable: the range [begin, end) of
// dimension split_dim, or the whole), in the worker's process: what tests
// that stand in for the ps (or hold the whole model) use to cut a member's
// part out and put it back. In a run the ps serves and applies the parts
// itself (ps/dense_part.h).
//
//   std::vector<float> part(var.local_elements());
//   CopySliceOut(whole.data<float>(), var, part.data());
//   ... train the part ...
//   CopySliceIn(part.data(), var, whole.data<float>());
//
// Both arrays are row-major in Keras's shapes: whole in var.shape, part in
// var.local_shape. A replicated variable's part is the whole.
#ifndef PSTRAIN_PARALLEL_VARIABLE_SLICE_H_
#define PSTRAIN_PARALLEL_VARIABLE_SLICE_H_

#include "parallel/tensor_parallel_plan.h"

namespace pstrain {
namespace parallel {

// part = var's part of `whole`.
void CopySliceOut(const float* whole, const MemberVariable& var, float* part);

// var's part of `whole` = part; the rest of `whole` unchanged.
void CopySliceIn(const float* part, const MemberVariable& var, float* whole);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_VARIABLE_SLICE_H_
