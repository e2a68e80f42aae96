#include "collective/ring_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace collective {
namespace {

int Mod(int64_t value, int size) {
  int64_t m = value % size;
  return static_cast<int>(m < 0 ? m + size : m);
}

}  // namespace

absl::StatusOr<RingPlan> RingPlan::Make(int size, int64_t num_elements,
                                        int64_t chunk_elements) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring size ", size, " must be at least 1"));
  }
  if (num_elements < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("element count ", num_elements, " must not be negative"));
  }
  if (chunk_elements < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk of ", chunk_elements, " elements: must be at least 1"));
  }
  const int64_t longest = (num_elements + size - 1) / size;
  if ((longest + chunk_elements - 1) / chunk_elements >
      std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a segment of ", longest, " elements in chunks of ",
                     chunk_elements, " would have 2^31 chunks or more"));
  }
  return RingPlan(size, num_elements, chunk_elements);
}

int64_t RingPlan::SegmentBegin(int segment) const {
  // Segment i is [i * n / size, (i + 1) * n / size): lengths differ by at
  // most one. (n * size cannot overflow: n < 2^62 in practice.)
  return num_elements_ / size_ * segment +
         num_elements_ % size_ * segment / size_;
}

int64_t RingPlan::SegmentLength(int segment) const {
  return SegmentBegin(segment + 1) - SegmentBegin(segment);
}

int RingPlan::NumChunks(int segment) const {
  return static_cast<int>((SegmentLength(segment) + chunk_elements_ - 1) /
                          chunk_elements_);
}

int64_t RingPlan::ChunkLength(int segment, int index) const {
  return std::min(chunk_elements_,
                  SegmentLength(segment) - index * chunk_elements_);
}

int RingPlan::SendSegment(int rank, int step) const {
  if (IsReduceStep(step)) return Mod(int64_t{rank} - step, size_);
  return Mod(int64_t{rank} + 1 - (step - (size_ - 1)), size_);
}

int RingPlan::ReceiveSegment(int rank, int step) const {
  return SendSegment(Mod(int64_t{rank} - 1, size_), step);
}

}  // namespace collective
}  // namespace pstrain
