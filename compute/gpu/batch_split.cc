#include "compute/gpu/batch_split.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<std::vector<BatchSlice>> SplitBatch(int64_t batch, int parts) {
  if (batch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SplitBatch: batch ", batch, " is negative"));
  }
  if (parts <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SplitBatch: parts must be positive, got ", parts));
  }
  const int64_t base = batch / parts;
  const int64_t larger = batch % parts;  // Slices that get base + 1.
  std::vector<BatchSlice> slices(parts);
  int64_t offset = 0;
  for (int i = 0; i < parts; ++i) {
    slices[i].offset = offset;
    slices[i].size = base + (i < larger ? 1 : 0);
    offset += slices[i].size;
  }
  return slices;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
