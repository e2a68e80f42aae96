// What a collective run's replica (collective/local_replica.h) sums its
// gradient buckets with: the ring over gRPC (collective/ring_allreduce.h)
// on CPU workers, NCCL (collective/nccl_gradient_reducer.h) on GPU workers.
// Either way every participant ends with the same sum, and a participant
// that vanishes makes the others fail within the all-reduce's timeout
// (DEADLINE_EXCEEDED or UNAVAILABLE), which the worker answers by asking the
// chief to restore the run. Each recovery generation (the run's start,
// every restore) is joined first: NCCL makes a new communicator
// (collective/nccl_rendezvous.h), the ring has nothing to do. A join that
// fails the same way is answered alike: the worker waits for the chief's
// next generation.
//
//   AllReducer* reducer = participant->ring();  // or an NcclRendezvous
//   PSTRAIN_RETURN_IF_ERROR(reducer->Join(generation));
//   PSTRAIN_RETURN_IF_ERROR(reducer->AllReduce(id, {grad1, grad2}));
#ifndef PSTRAIN_COLLECTIVE_ALL_REDUCER_H_
#define PSTRAIN_COLLECTIVE_ALL_REDUCER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace pstrain {
namespace collective {

class AllReducer {
 public:
  virtual ~AllReducer() = default;

  // Makes ready the all-reduces of recovery generation `generation`, which
  // every participant joins alike. OK at once where nothing is per
  // generation (the ring, whose connections outlive a peer).
  // DEADLINE_EXCEEDED or UNAVAILABLE when the peers do not come: a peer
  // failure (common/retry.h), after which the next generation is joined.
  virtual absl::Status Join(int64_t generation) {
    (void)generation;
    return absl::OkStatus();
  }

  // Replaces each of `tensors` with the sum over the participants of theirs
  // (all-reduced as their concatenation) for all-reduce `id`, which every
  // participant passes alike and which strictly increases from call to
  // call. INVALID_ARGUMENT for an id not above the last one;
  // FAILED_PRECONDITION once shut down.
  virtual absl::Status AllReduce(
      uint64_t id, absl::Span<const absl::Span<float>> tensors) = 0;

  // Gives up the running all-reduce and refuses every later one: the
  // participant is going away.
  virtual void Shutdown() = 0;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_ALL_REDUCER_H_
