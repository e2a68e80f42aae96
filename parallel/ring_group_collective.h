// GroupCollective (group_collective.h) over the ring all-reduce of
// collective mode (collective/ring_allreduce.h), so that the members of a
// model-parallel group can be worker processes: each member holds a ring
// participant among its group's members (collective/ring_participant.h
// assembles it over gRPC) and hands its RingAllReduce here.
//
//   PSTRAIN_ASSIGN_OR_RETURN(auto participant,
//                            collective::RingParticipant::Start(options));
//   RingGroupCollective group(participant->ring(), rank, size);
//   TensorParallelMember::Create(spec, plan, &group, ...);
//
// AllReduceSum is one ring all-reduce. AllGather is one too, of a buffer of
// size() pieces in which each member fills its own and leaves the others
// zero: every member ends with the concatenation exactly (x + 0 == x), at
// size() times the bytes of a ring all-gather; a dedicated all-gather pass
// would send 1/size() as much. Each collective takes the next all-reduce id
// (the ring needs them strictly increasing), so every member must call the
// same collectives in the same order, as the members of one plan do.
// Results are the same bits on every member (the ring's guarantee), summed
// in the ring's order rather than member order. Used by one thread.
#ifndef PSTRAIN_PARALLEL_RING_GROUP_COLLECTIVE_H_
#define PSTRAIN_PARALLEL_RING_GROUP_COLLECTIVE_H_

#include <cstdint>
#include <vector>

#include "collective/ring_allreduce.h"
#include "parallel/group_collective.h"

namespace pstrain {
namespace parallel {

class RingGroupCollective : public GroupCollective {
 public:
  // `ring` (of `size` participants, this one `rank`) must outlive this.
  // `first_id` is the id of the first collective; later ones count up.
  RingGroupCollective(collective::RingAllReduce* ring, int rank, int size,
                      uint64_t first_id = 1)
      : ring_(ring), rank_(rank), size_(size), next_id_(first_id) {}

  int size() const override { return size_; }
  int rank() const override { return rank_; }

  absl::Status AllReduceSum(absl::Span<float> values) override;
  absl::Status AllGather(absl::Span<const float> piece,
                         absl::Span<float> gathered) override;

 private:
  collective::RingAllReduce* const ring_;
  const int rank_;
  const int size_;
  uint64_t next_id_;
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_RING_GROUP_COLLECTIVE_H_
