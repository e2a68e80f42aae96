#include "parallel/split_columns.h"

#include <algorithm>

#include "common/status_macros.h"

namespace pstrain {
namespace parallel {

void TakeColumns(const float* whole, int64_t rows, int64_t full, int64_t begin,
                 int64_t width, float* slice) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(whole + r * full + begin, whole + r * full + begin + width,
              slice + r * width);
  }
}

absl::Status GatherColumns(GroupCollective* group, const float* slice,
                           int64_t rows, int64_t width,
                           std::vector<float>* scratch, float* whole) {
  const int64_t m = group->size();
  scratch->resize(m * rows * width);
  PSTRAIN_RETURN_IF_ERROR(group->AllGather(
      absl::MakeConstSpan(slice, rows * width), absl::MakeSpan(*scratch)));
  // Member k's [rows, width] piece holds columns [k * width, (k+1) * width).
  for (int64_t k = 0; k < m; ++k) {
    const float* piece = scratch->data() + k * rows * width;
    for (int64_t r = 0; r < rows; ++r) {
      std::copy(piece + r * width, piece + (r + 1) * width,
                whole + r * m * width + k * width);
    }
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace pstrain
