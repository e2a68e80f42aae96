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
//
// It counts what the ring moves for it: the payload bytes of the chunks
// this member sends to its right neighbour and receives from its left one,
// by the ring's own plan of each collective (collective/ring_plan.h:
// 2 * (size - 1) steps, one segment each way per step) over the buffer it
// hands the ring, in float32 (a tensor-parallel run's ring carries no
// bf16). gRPC's framing is not counted. bytes_sent()/bytes_received() give
// the totals; the optional counters (a worker's Prometheus metrics) get the
// same increments.
#ifndef PSTRAIN_PARALLEL_RING_GROUP_COLLECTIVE_H_
#define PSTRAIN_PARALLEL_RING_GROUP_COLLECTIVE_H_

#include <cstdint>
#include <vector>

#include "collective/ring_allreduce.h"
#include "common/metrics.h"
#include "parallel/group_collective.h"

namespace pstrain {
namespace parallel {

class RingGroupCollective : public GroupCollective {
 public:
  // `ring` (of `size` participants, this one `rank`) must outlive this.
  // `first_id` is the id of the first collective; later ones count up.
  // `sent` and `received`, when not null, must outlive this too.
  RingGroupCollective(collective::RingAllReduce* ring, int rank, int size,
                      uint64_t first_id = 1, Counter* sent = nullptr,
                      Counter* received = nullptr)
      : ring_(ring),
        rank_(rank),
        size_(size),
        next_id_(first_id),
        sent_counter_(sent),
        received_counter_(received) {}

  int size() const override { return size_; }
  int rank() const override { return rank_; }

  absl::Status AllReduceSum(absl::Span<float> values) override;
  absl::Status AllGather(absl::Span<const float> piece,
                         absl::Span<float> gathered) override;

  // Payload bytes this member's collectives sent and received so far.
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  // One all-reduce of `values` on the ring, counted.
  absl::Status RingAllReduce(absl::Span<float> values);

  collective::RingAllReduce* const ring_;
  const int rank_;
  const int size_;
  uint64_t next_id_;
  Counter* const sent_counter_;
  Counter* const received_counter_;
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_RING_GROUP_COLLECTIVE_H_
