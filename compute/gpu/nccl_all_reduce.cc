#include "compute/gpu/nccl_all_reduce.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<std::unique_ptr<NcclAllReducer>> NcclAllReducer::Create(
    const std::vector<Device*>& devices) {
  if (devices.empty()) {
    return absl::InvalidArgumentError("NcclAllReducer: no devices");
  }
  std::vector<int> indices;
  std::set<int> seen;
  for (const Device* device : devices) {
    if (device == nullptr) {
      return absl::InvalidArgumentError("NcclAllReducer: a device is null");
    }
    if (!seen.insert(device->index()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "NcclAllReducer: GPU ", device->index(), " is listed twice"));
    }
    indices.push_back(device->index());
  }
  std::unique_ptr<NcclAllReducer> reducer(new NcclAllReducer(devices));
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  PSTRAIN_RETURN_IF_ERROR(
      NcclStatus(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()),
                                 indices.data()),
                 "ncclCommInitAll"));
  reducer->comms_ = std::move(comms);
  return reducer;
}

absl::StatusOr<std::unique_ptr<NcclAllReducer>> NcclAllReducer::Join(
    Device* device, const ncclUniqueId& id, int num_ranks, int rank,
    absl::Duration timeout) {
  if (device == nullptr) {
    return absl::InvalidArgumentError("NcclAllReducer: the device is null");
  }
  if (num_ranks < 1 || rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NcclAllReducer: rank ", rank, " is outside [0, ", num_ranks, ")"));
  }
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  std::unique_ptr<NcclAllReducer> reducer(new NcclAllReducer({device}));
  reducer->joined_ = true;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: a rank that never comes is a timeout here, not a hang.
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      ncclCommInitRankConfig(&comm, num_ranks, id, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    return NcclStatus(result, absl::StrCat("ncclCommInitRankConfig (rank ",
                                           rank, " of ", num_ranks, ")"));
  }
  reducer->comms_ = {comm};
  PSTRAIN_RETURN_IF_ERROR(reducer->WaitForComm(
      absl::Now() + timeout, absl::StrCat("ncclCommInitRankConfig (rank ", rank,
                                          " of ", num_ranks, ")")));
  return reducer;
}

absl::Status NcclAllReducer::WaitForComm(absl::Time deadline,
                                         absl::string_view what,
                                         cudaStream_t stream) {
  ncclComm_t comm = comms_[0];
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
    const cudaError_t ran =
        stream == nullptr ? cudaSuccess : cudaStreamQuery(stream);
    absl::Status failed;
    if (asked != ncclSuccess) {
      failed = NcclStatus(asked, "ncclCommGetAsyncError");
    } else if (state == ncclSuccess && ran == cudaSuccess) {
      return absl::OkStatus();
    } else if (ran != cudaSuccess && ran != cudaErrorNotReady) {
      failed = CudaStatus(ran, absl::StrCat("cudaStreamQuery after ", what));
    } else if (state != ncclSuccess && state != ncclInProgress) {
      failed = absl::UnavailableError(absl::StrCat(
          what, " failed (a peer gone?): ", ncclGetErrorString(state), " ",
          ncclGetLastError(comm)));
    } else if (abort_requested_.load()) {
      failed = absl::CancelledError(absl::StrCat(what, ": aborted"));
    } else if (absl::Now() >= deadline) {
      failed = absl::DeadlineExceededError(
          absl::StrCat(what, " did not complete in time: a peer is missing"));
    }
    if (!failed.ok()) {
      ncclCommAbort(comm);
      aborted_ = true;
      return failed;
    }
    absl::SleepFor(absl::Microseconds(50));
  }
}

absl::Status NcclAllReducer::AllReduceRank(void* buffer, int64_t count,
                                           ncclDataType_t type,
                                           absl::Duration timeout) {
  if (!joined_) {
    return absl::FailedPreconditionError(
        "NcclAllReducer: AllReduceRank needs a reducer made by Join");
  }
  if (aborted_ || abort_requested_.load()) {
    return absl::FailedPreconditionError(
        "NcclAllReducer: the communicator was aborted");
  }
  if (count < 0 || (count > 0 && buffer == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NcclAllReducer: count ", count, " with a null or no buffer"));
  }
  if (type != ncclFloat && type != ncclBfloat16) {
    return absl::InvalidArgumentError(
        "NcclAllReducer: only ncclFloat and ncclBfloat16 are summed");
  }
  if (count == 0) return absl::OkStatus();
  Device* const device = devices_[0];
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  const absl::Time deadline = absl::Now() + timeout;
  const ncclResult_t result =
      ncclAllReduce(buffer, buffer, static_cast<size_t>(count), type, ncclSum,
                    comms_[0], device->stream());
  if (result != ncclSuccess && result != ncclInProgress) {
    ncclCommAbort(comms_[0]);
    aborted_ = true;
    return absl::UnavailableError(
        NcclStatus(result, "ncclAllReduce").message());
  }
  // Polled, so that a peer that died mid-way is noticed (NCCL reports it
  // as an async error) instead of a wait without end.
  return WaitForComm(deadline, "ncclAllReduce", device->stream());
}

NcclAllReducer::~NcclAllReducer() {
  if (aborted_) return;
  if (joined_ && abort_requested_.load()) {
    for (ncclComm_t comm : comms_) ncclCommAbort(comm);
    return;
  }
  for (ncclComm_t comm : comms_) {
    const ncclResult_t result = ncclCommDestroy(comm);
    if (result != ncclSuccess) {
      std::fprintf(stderr, "pstrain gpu: ncclCommDestroy failed: %s\n",
                   ncclGetErrorString(result));
    }
  }
}

absl::Status NcclAllReducer::AllReduceSum(const std::vector<float*>& buffers,
                                          int64_t count) {
  if (joined_) {
    return absl::FailedPreconditionError(
        "NcclAllReducer: a Join()ed reducer sums with AllReduceRank");
  }
  if (buffers.size() != devices_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("NcclAllReducer: ", buffers.size(), " buffers for ",
                     devices_.size(), " devices"));
  }
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("NcclAllReducer: count ", count, " is negative"));
  }
  for (const float* buffer : buffers) {
    if (buffer == nullptr) {
      return absl::InvalidArgumentError("NcclAllReducer: a buffer is null");
    }
  }
  if (count == 0) return absl::OkStatus();
  PSTRAIN_RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
  // Every call of the group must be made, and ncclGroupEnd called, even
  // after a failure; the first error is returned.
  absl::Status status;
  for (size_t i = 0; i < devices_.size(); ++i) {
    status.Update(NcclStatus(
        ncclAllReduce(buffers[i], buffers[i], static_cast<size_t>(count),
                      ncclFloat, ncclSum, comms_[i], devices_[i]->stream()),
        absl::StrCat("ncclAllReduce on GPU ", devices_[i]->index())));
  }
  status.Update(NcclStatus(ncclGroupEnd(), "ncclGroupEnd"));
  PSTRAIN_RETURN_IF_ERROR(status);
  for (const Device* device : devices_) {
    PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
    PSTRAIN_RETURN_IF_ERROR(device->Synchronize());
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
