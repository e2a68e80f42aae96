// Where each piece of a ring all-reduce goes: the layout that every
// participant computes alike from (ring size, element count, chunk size).
//
// The flat buffer of num_elements is cut into `size` segments of nearly equal
// length (they differ by at most one element; some are empty when
// num_elements < size), and each segment into chunks of at most
// chunk_elements. The all-reduce takes 2 * (size - 1) steps. At step s of
// the reduce-scatter (s < size - 1) rank r sends segment (r - s) mod size to
// its right neighbour and receives segment (r - s - 1) mod size from its
// left one, which it adds to its own; after it, rank r holds the full sum of
// segment (r + 1) mod size. At step size - 1 + k of the all-gather it sends
// segment (r + 1 - k) mod size and receives segment (r - k) mod size, which
// replaces its own. What a rank receives at step s it sends at step s + 1,
// chunk by chunk, which is what lets a chunk go out while the next is summed.
#ifndef PSTRAIN_COLLECTIVE_RING_PLAN_H_
#define PSTRAIN_COLLECTIVE_RING_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace pstrain {
namespace collective {

class RingPlan {
 public:
  // INVALID_ARGUMENT naming the value when size < 1, num_elements < 0,
  // chunk_elements < 1, or a segment would have 2^31 chunks or more.
  static absl::StatusOr<RingPlan> Make(int size, int64_t num_elements,
                                       int64_t chunk_elements);

  int size() const { return size_; }
  int64_t num_elements() const { return num_elements_; }
  int64_t chunk_elements() const { return chunk_elements_; }
  // 2 * (size - 1).
  int num_steps() const { return 2 * (size_ - 1); }
  // Whether step `step` is part of the reduce-scatter (else the all-gather).
  bool IsReduceStep(int step) const { return step < size_ - 1; }

  // Segment `segment` (in [0, size)) is [SegmentBegin, SegmentBegin +
  // SegmentLength) of the flat buffer.
  int64_t SegmentBegin(int segment) const;
  int64_t SegmentLength(int segment) const;
  // Its number of chunks; chunk `index` starts at SegmentBegin +
  // index * chunk_elements and has ChunkLength elements.
  int NumChunks(int segment) const;
  int64_t ChunkLength(int segment, int index) const;

  // The segments rank `rank` sends and receives at step `step`.
  int SendSegment(int rank, int step) const;
  int ReceiveSegment(int rank, int step) const;

 private:
  RingPlan(int size, int64_t num_elements, int64_t chunk_elements)
      : size_(size),
        num_elements_(num_elements),
        chunk_elements_(chunk_elements) {}

  int size_;
  int64_t num_elements_;
  int64_t chunk_elements_;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_PLAN_H_
