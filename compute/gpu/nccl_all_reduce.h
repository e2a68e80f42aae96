// Summing gradients across the GPUs of this machine with NCCL: one
// communicator per GPU from ncclCommInitAll, and one all-reduce per GPU
// issued inside a ncclGroupStart/ncclGroupEnd pair from a single thread.
//
//   std::vector<Device*> gpus = {gpu0.get(), gpu1.get()};
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<NcclAllReducer> reducer,
//                            NcclAllReducer::Create(gpus));
//   // grads[i]: `count` floats on gpus[i], after each GPU's backward pass.
//   PSTRAIN_RETURN_IF_ERROR(reducer->AllReduceSum(grads, count));
//   // Every grads[i] now holds the elementwise sum over all GPUs.
//
// The all-reduce runs on each Device's stream after the work already
// enqueued there (no extra synchronization needed before it), and
// AllReduceSum waits for it on every GPU before returning. With one GPU it
// is a no-op copy. Not thread-safe; the Devices must outlive the reducer.
//
// Across processes (hosts): each process joins one communicator of
// `num_ranks` with the ncclUniqueId one of them made (ncclGetUniqueId) and
// handed to all, with its own GPU, and calls AllReduceRank:
//
//   PSTRAIN_ASSIGN_OR_RETURN(auto reducer,
//       NcclAllReducer::Join(gpu.get(), id, num_ranks, rank, timeout));
//   PSTRAIN_RETURN_IF_ERROR(
//       reducer->AllReduceRank(device_buffer, count, ncclFloat, timeout));
//
// A peer that dies or never comes makes Join or AllReduceRank abort the
// communicator (ncclCommAbort) after `timeout` and fail; the reducer is then
// spent (a new one is joined with a new id).
#ifndef PSTRAIN_COMPUTE_GPU_NCCL_ALL_REDUCE_H_
#define PSTRAIN_COMPUTE_GPU_NCCL_ALL_REDUCE_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "compute/gpu/device.h"

namespace pstrain {
namespace worker {
namespace gpu {

class NcclAllReducer {
 public:
  // INVALID_ARGUMENT for no devices, a null one or the same GPU twice; an
  // NCCL failure as a status naming ncclCommInitAll.
  static absl::StatusOr<std::unique_ptr<NcclAllReducer>> Create(
      const std::vector<Device*>& devices);

  NcclAllReducer(const NcclAllReducer&) = delete;
  NcclAllReducer& operator=(const NcclAllReducer&) = delete;
  ~NcclAllReducer();

  // Rank `rank` of a communicator of `num_ranks` processes, one GPU each,
  // made from `id` (the same for every rank). Non-blocking: waits for the
  // others up to `timeout`, then aborts (DEADLINE_EXCEEDED). INVALID_ARGUMENT
  // for a null device, num_ranks < 1 or a rank outside [0, num_ranks);
  // NCCL's refusals (two ranks on one GPU among them) as a status naming
  // ncclCommInitRankConfig.
  static absl::StatusOr<std::unique_ptr<NcclAllReducer>> Join(
      Device* device, const ncclUniqueId& id, int num_ranks, int rank,
      absl::Duration timeout);

  int num_devices() const { return static_cast<int>(devices_.size()); }

  // In place: buffers[i] (count floats on devices[i]) becomes the sum over
  // all devices of their buffers. INVALID_ARGUMENT unless there is one
  // non-null buffer per device and count >= 0.
  absl::Status AllReduceSum(const std::vector<float*>& buffers, int64_t count);

  // A Join()ed reducer: `count` elements of `type` (ncclFloat or
  // ncclBfloat16) at `buffer`, device memory of this rank's GPU, become their
  // sum over the ranks, in stream order after the work enqueued before; it
  // waits for the result. DEADLINE_EXCEEDED when that takes longer than
  // `timeout`, UNAVAILABLE when NCCL reports an error (a peer gone): either
  // way the communicator is aborted, and this and every later call fail.
  // FAILED_PRECONDITION for a reducer made by Create or already aborted.
  absl::Status AllReduceRank(void* buffer, int64_t count, ncclDataType_t type,
                             absl::Duration timeout);

  // Asks for a Join()ed communicator to be aborted (ncclCommAbort): a
  // running AllReduceRank on another thread aborts it and fails
  // (CANCELLED), later calls are refused, and the destructor aborts what no
  // call did. The one method callable from any thread. Idempotent.
  void Abort() { abort_requested_.store(true); }

 private:
  explicit NcclAllReducer(const std::vector<Device*>& devices)
      : devices_(devices) {}

  // Polls the communicator until its pending operation is done, and
  // `stream` (if not null) has run what was enqueued on it; on a failure, an
  // Abort() or the deadline it aborts the communicator. `what` names the
  // operation.
  absl::Status WaitForComm(absl::Time deadline, absl::string_view what,
                           cudaStream_t stream = nullptr);

  const std::vector<Device*> devices_;
  std::vector<ncclComm_t> comms_;
  // Join()ed: one comm, across processes; aborted: comms_ are gone.
  bool joined_ = false;
  bool aborted_ = false;
  std::atomic<bool> abort_requested_{false};
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_NCCL_ALL_REDUCE_H_
