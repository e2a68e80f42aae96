// The collectives the M members of a model-parallel group exchange
// activations and gradients with (tensor_parallel_member.h): an all-reduce
// sum after a row-parallel layer, an all-gather of a column-parallel
// layer's slices. The in-process implementation (local_group_collective.h)
// runs members as threads, for tests; ring_group_collective.h runs them
// over collective mode's gRPC ring, as worker processes.
//
//   std::vector<float> partial = ...;  // this member's [batch, out]
//   PSTRAIN_RETURN_IF_ERROR(group->AllReduceSum(absl::MakeSpan(partial)));
//   std::vector<float> whole(group->size() * piece.size());
//   PSTRAIN_RETURN_IF_ERROR(group->AllGather(piece, absl::MakeSpan(whole)));
//
// Every member calls the same collectives in the same order with buffers of
// the same length. Results are the same on every member, bit for bit (the
// order in which a sum is added is the implementation's: LocalGroup's is
// member order, the ring's its own). A member's object is used by one
// thread.
#ifndef PSTRAIN_PARALLEL_GROUP_COLLECTIVE_H_
#define PSTRAIN_PARALLEL_GROUP_COLLECTIVE_H_

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace pstrain {
namespace parallel {

class GroupCollective {
 public:
  virtual ~GroupCollective() = default;

  // M, and this member's index in [0, M).
  virtual int size() const = 0;
  virtual int rank() const = 0;

  // values = the elementwise sum over the members of their `values`, the
  // same bits on every member. Blocks until every member has called.
  virtual absl::Status AllReduceSum(absl::Span<float> values) = 0;

  // gathered (size() * piece.size() floats) = the members' pieces
  // concatenated in member order. Blocks until every member has called.
  virtual absl::Status AllGather(absl::Span<const float> piece,
                                 absl::Span<float> gathered) = 0;
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_GROUP_COLLECTIVE_H_
