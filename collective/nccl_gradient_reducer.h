// A GPU worker's all-reduce of a collective run's gradients with NCCL,
// across processes and hosts: the collective/all_reducer.h that a worker's
// replica (collective/local_replica.h) sums its gradient buckets with
// instead of the gRPC ring. Shaped like the ring: each bucket (its tensors
// concatenated) is copied to one device buffer of this worker's GPU, summed
// there by ncclAllReduce among all the run's workers (one communicator, one
// rank per worker, each on its own GPU), and copied back; the replica then
// divides by the global batch and applies the step, as with the ring.
//
//   // One process makes the id and hands it to every rank (the chief, per
//   // recovery generation: a restored run joins a new communicator).
//   PSTRAIN_ASSIGN_OR_RETURN(std::string id,
//                            NcclGradientReducer::NewUniqueId());
//   NcclGradientReducerOptions options;
//   options.gpu = 0; options.rank = index; options.num_ranks = workers;
//   options.unique_id = id;
//   PSTRAIN_ASSIGN_OR_RETURN(auto reducer,
//                            NcclGradientReducer::Create(options));
//   replica_options.ring = reducer.get();
//
// With RING_DTYPE_BFLOAT16 the bucket travels as bfloat16 (collective/
// bf16.h, rounded once on the host) and NCCL sums bfloat16; the result is
// the same on every rank. Errors: Create and AllReduce wait at most
// `timeout` for the other ranks, then abort the communicator
// (DEADLINE_EXCEEDED); a peer that died mid-way is UNAVAILABLE. Either way
// the reducer is spent: the worker asks the chief to restore the run, which
// joins a new communicator. AllReduce is called by one thread at a time;
// Shutdown from any thread.
#ifndef PSTRAIN_COLLECTIVE_NCCL_GRADIENT_REDUCER_H_
#define PSTRAIN_COLLECTIVE_NCCL_GRADIENT_REDUCER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collective/all_reducer.h"
#include "compute/gpu/device.h"
#include "compute/gpu/nccl_all_reduce.h"
#include "proto/collective.pb.h"

namespace pstrain {
namespace collective {

struct NcclGradientReducerOptions {
  // This worker's GPU (an index among the machine's).
  int gpu = 0;
  // This worker's rank among num_ranks (>= 1), every one on its own GPU.
  int rank = 0;
  int num_ranks = 1;
  // The communicator's ncclUniqueId, as its NCCL_UNIQUE_ID_BYTES bytes
  // (NewUniqueId), the same on every rank.
  std::string unique_id;
  // RING_DTYPE_FLOAT32 or RING_DTYPE_BFLOAT16.
  RingDtype dtype = RING_DTYPE_FLOAT32;
  // The longest Create waits for the other ranks, and an AllReduce for its
  // sum. > 0.
  absl::Duration timeout = absl::Seconds(30);
};

class NcclGradientReducer : public AllReducer {
 public:
  // A fresh ncclUniqueId's bytes. The calling process serves the
  // communicator's bootstrap until the ranks have joined: it must live that
  // long.
  static absl::StatusOr<std::string> NewUniqueId();

  // Opens the GPU and joins the communicator. INVALID_ARGUMENT naming the
  // option that is wrong (a unique_id of another size among them);
  // FAILED_PRECONDITION without a usable GPU; DEADLINE_EXCEEDED when the
  // other ranks do not join within the timeout; NCCL's refusal (two ranks
  // on one GPU: "Duplicate GPU detected") as a status naming the call.
  static absl::StatusOr<std::unique_ptr<NcclGradientReducer>> Create(
      NcclGradientReducerOptions options);
  ~NcclGradientReducer() override;

  absl::Status AllReduce(uint64_t id,
                         absl::Span<const absl::Span<float>> tensors) override;
  void Shutdown() override;

 private:
  explicit NcclGradientReducer(NcclGradientReducerOptions options)
      : options_(std::move(options)) {}

  const NcclGradientReducerOptions options_;
  std::unique_ptr<worker::gpu::Device> device_;
  std::unique_ptr<worker::gpu::NcclAllReducer> nccl_;
  // The bucket on the device and, for bfloat16, on the host; grown as
  // needed, reused from call to call.
  worker::gpu::DeviceBuffer buffer_;
  std::vector<float> host_;
  std::vector<uint16_t> host_bf16_;
  uint64_t last_id_ = 0;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_NCCL_GRADIENT_REDUCER_H_
