#include "collective/nccl_gradient_reducer.h"

#include <nccl.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collective/bf16.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pstrain {
namespace collective {

absl::StatusOr<std::string> NcclGradientReducer::NewUniqueId() {
  ncclUniqueId id;
  PSTRAIN_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclGradientReducer>>
NcclGradientReducer::Create(NcclGradientReducerOptions options) {
  if (options.num_ranks < 1 || options.rank < 0 ||
      options.rank >= options.num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL all-reduce: rank ", options.rank,
                     " is outside [0, ", options.num_ranks, ")"));
  }
  if (options.unique_id.size() != NCCL_UNIQUE_ID_BYTES) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL all-reduce: the unique id has ", options.unique_id.size(),
        " bytes, not NCCL_UNIQUE_ID_BYTES (", NCCL_UNIQUE_ID_BYTES, ")"));
  }
  if (options.dtype != RING_DTYPE_FLOAT32 &&
      options.dtype != RING_DTYPE_BFLOAT16) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL all-reduce: dtype ", RingDtype_Name(options.dtype),
                     " is neither float32 nor bfloat16"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "NCCL all-reduce: the timeout must be > 0");
  }
  std::unique_ptr<NcclGradientReducer> reducer(
      new NcclGradientReducer(options));
  PSTRAIN_ASSIGN_OR_RETURN(reducer->device_,
                           worker::gpu::CreateDevice(options.gpu));
  ncclUniqueId id;
  std::memcpy(id.internal, options.unique_id.data(), NCCL_UNIQUE_ID_BYTES);
  PSTRAIN_ASSIGN_OR_RETURN(
      reducer->nccl_,
      worker::gpu::NcclAllReducer::Join(reducer->device_.get(), id,
                                        options.num_ranks, options.rank,
                                        options.timeout));
  return reducer;
}

NcclGradientReducer::~NcclGradientReducer() {
  // The communicator goes before the buffers and the device it uses.
  nccl_.reset();
}

void NcclGradientReducer::Shutdown() {
  if (nccl_ != nullptr) nccl_->Abort();
}

absl::Status NcclGradientReducer::AllReduce(
    uint64_t id, absl::Span<const absl::Span<float>> tensors) {
  if (id == 0 || id <= last_id_) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL all-reduce: id ", id, " is not above the last, ",
                     last_id_));
  }
  last_id_ = id;
  int64_t count = 0;
  for (absl::Span<float> tensor : tensors) count += tensor.size();
  if (count == 0) return absl::OkStatus();
  const bool bf16 = options_.dtype == RING_DTYPE_BFLOAT16;
  const size_t bytes = count * (bf16 ? sizeof(uint16_t) : sizeof(float));
  if (buffer_.bytes() < bytes) {
    buffer_ = worker::gpu::DeviceBuffer();
    PSTRAIN_ASSIGN_OR_RETURN(buffer_, device_->Allocate(bytes));
  }
  char* const device = static_cast<char*>(buffer_.data());
  if (bf16) {
    host_bf16_.resize(count);
    int64_t at = 0;
    for (absl::Span<float> tensor : tensors) {
      for (float value : tensor) host_bf16_[at++] = FloatToBf16(value);
    }
    PSTRAIN_RETURN_IF_ERROR(
        device_->CopyToDevice(host_bf16_.data(), bytes, device));
  } else {
    size_t at = 0;
    for (absl::Span<float> tensor : tensors) {
      PSTRAIN_RETURN_IF_ERROR(device_->CopyToDevice(
          tensor.data(), tensor.size() * sizeof(float), device + at));
      at += tensor.size() * sizeof(float);
    }
  }
  PSTRAIN_RETURN_IF_ERROR(nccl_->AllReduceRank(
      device, count, bf16 ? ncclBfloat16 : ncclFloat, options_.timeout));
  if (bf16) {
    PSTRAIN_RETURN_IF_ERROR(
        device_->CopyToHost(device, bytes, host_bf16_.data()));
    int64_t at = 0;
    for (absl::Span<float> tensor : tensors) {
      for (float& value : tensor) value = Bf16ToFloat(host_bf16_[at++]);
    }
  } else {
    size_t at = 0;
    for (absl::Span<float> tensor : tensors) {
      PSTRAIN_RETURN_IF_ERROR(device_->CopyToHost(
          device + at, tensor.size() * sizeof(float), tensor.data()));
      at += tensor.size() * sizeof(float);
    }
  }
  return absl::OkStatus();
}

}  // namespace collective
}  // namespace pstrain
