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
#ifndef PSTRAIN_COMPUTE_GPU_NCCL_ALL_REDUCE_H_
#define PSTRAIN_COMPUTE_GPU_NCCL_ALL_REDUCE_H_

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

  int num_devices() const { return static_cast<int>(devices_.size()); }

  // In place: buffers[i] (count floats on devices[i]) becomes the sum over
  // all devices of their buffers. INVALID_ARGUMENT unless there is one
  // non-null buffer per device and count >= 0.
  absl::Status AllReduceSum(const std::vector<float*>& buffers, int64_t count);

 private:
  explicit NcclAllReducer(const std::vector<Device*>& devices)
      : devices_(devices) {}

  const std::vector<Device*> devices_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_NCCL_ALL_REDUCE_H_
