// A GPU worker's NCCL all-reduce across the recovery generations of a
// collective run: the collective/all_reducer.h its replica sums gradients
// with when the workers compute on GPUs. An NCCL communicator does not
// outlive a peer, so each generation (the run's start, every restore by the
// chief) joins a new one (collective/nccl_gradient_reducer.h): worker 0
// makes its ncclUniqueId and publishes it through the chief, which hands it
// to every worker (HeartbeatResponse.nccl_unique_id); each joins with it.
// The chief is reached through the two functions of the options, so that
// this knows nothing of gRPC.
//
//   NcclRendezvousOptions options;  // rank, num_ranks, gpu, dtype, timeout
//   options.publish = [&](int64_t g, const std::string& id) { ... };
//   options.fetch = [&](int64_t g) -> absl::StatusOr<std::string> { ... };
//   PSTRAIN_ASSIGN_OR_RETURN(auto nccl, NcclRendezvous::Create(options));
//   PSTRAIN_RETURN_IF_ERROR(nccl->Join(generation));  // at each generation
//   replica_options.ring = nccl.get();
//
// A worker built without CUDA gets UNIMPLEMENTED from Create. Join and
// AllReduce are called by the training thread (AllReduce by the replica's
// reducer, never during a Join); Shutdown from any thread.
#ifndef PSTRAIN_COLLECTIVE_NCCL_RENDEZVOUS_H_
#define PSTRAIN_COLLECTIVE_NCCL_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collective/all_reducer.h"
#include "proto/collective.pb.h"

namespace pstrain {
namespace collective {

struct NcclRendezvousOptions {
  // This worker's rank (its index) among num_ranks workers, and its GPU.
  int rank = 0;
  int num_ranks = 1;
  int gpu = 0;
  // What the all-reduce sends (RING_DTYPE_FLOAT32 or RING_DTYPE_BFLOAT16).
  RingDtype dtype = RING_DTYPE_FLOAT32;
  // How long a Join waits for the id and for the other workers, and an
  // all-reduce for its sum. > 0.
  absl::Duration timeout = absl::Seconds(30);
  // How often a worker other than 0 asks for the id.
  absl::Duration poll = absl::Milliseconds(50);
  // Rank 0: hands the id of `generation`'s communicator to the chief.
  std::function<absl::Status(int64_t generation, const std::string& id)>
      publish;
  // The others: the id the chief holds for `generation`, "" while it has
  // none yet.
  std::function<absl::StatusOr<std::string>(int64_t generation)> fetch;
};

class NcclRendezvous : public AllReducer {
 public:
  // INVALID_ARGUMENT for a bad rank or timeout or a missing function;
  // UNIMPLEMENTED in a build without CUDA.
  static absl::StatusOr<std::unique_ptr<NcclRendezvous>> Create(
      NcclRendezvousOptions options);
  ~NcclRendezvous() override;

  // Leaves the communicator of the last generation (if any) and joins that
  // of `generation`; nothing when it is the one joined already (a worker
  // that joined at its start and then restores the run's checkpoint).
  // DEADLINE_EXCEEDED when the id or a peer does not come within the
  // timeout; the failure of publish or fetch as it is.
  absl::Status Join(int64_t generation) override ABSL_LOCKS_EXCLUDED(mu_);

  // The current communicator's all-reduce (collective/all_reducer.h);
  // FAILED_PRECONDITION before a Join succeeded.
  absl::Status AllReduce(uint64_t id,
                         absl::Span<const absl::Span<float>> tensors) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit NcclRendezvous(NcclRendezvousOptions options)
      : options_(std::move(options)) {}
  // The id of `generation`: made and published (rank 0) or fetched.
  absl::StatusOr<std::string> IdFor(int64_t generation);

  const NcclRendezvousOptions options_;
  absl::Mutex mu_;
  std::shared_ptr<AllReducer> current_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // The generation of current_ (-1: none). Only Join touches it.
  int64_t joined_generation_ = -1;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_NCCL_RENDEZVOUS_H_
