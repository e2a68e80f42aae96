// Moving between a whole activation and a member's column slice of it: the
// tensor-parallel members (tensor_parallel_stage.h, tensor_parallel_member.h)
// split activations on their last axis, so a [rows, full] matrix (rows =
// batch times the leading dimensions) is held by member k as the columns
// [k * width, (k + 1) * width) of each row, width = full / M.
//
//   TakeColumns(whole, rows, full, member * width, width, slice);
//   PSTRAIN_RETURN_IF_ERROR(
//       GatherColumns(group, slice, rows, width, &scratch, whole));
#ifndef PSTRAIN_PARALLEL_SPLIT_COLUMNS_H_
#define PSTRAIN_PARALLEL_SPLIT_COLUMNS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "parallel/group_collective.h"

namespace pstrain {
namespace parallel {

// slice ([rows, width]) = the columns [begin, begin + width) of each row of
// whole ([rows, full]).
void TakeColumns(const float* whole, int64_t rows, int64_t full, int64_t begin,
                 int64_t width, float* slice);

// whole ([rows, M * width]) = every member's slice ([rows, width]) side by
// side, in member order: an all-gather through `group` (`scratch` holds the
// gathered pieces). A collective's error as it came.
absl::Status GatherColumns(GroupCollective* group, const float* slice,
                           int64_t rows, int64_t width,
                           std::vector<float>* scratch, float* whole);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_SPLIT_COLUMNS_H_
