// What a collective run's replica (collective/local_replica.h) sums its
// gradient buckets with: the ring over gRPC (collective/ring_allreduce.h)
// on CPU workers, NCCL (collective/nccl_gradient_reducer.h) on GPU workers.
// Either way every participant ends with the same sum, and a participant
// that vanishes makes the others fail within the all-reduce's timeout
// (DEADLINE_EXCEEDED or UNAVAILABLE), which the worker answers by asking the
// chief to restore the run.
//
//   AllReducer* reducer = participant->ring();  // or NcclGradientReducer
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
