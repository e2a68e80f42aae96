#include "compute/gpu/nccl_all_reduce.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
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

NcclAllReducer::~NcclAllReducer() {
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
