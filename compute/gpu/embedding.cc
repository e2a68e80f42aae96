#include "compute/gpu/embedding.h"

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/kernels.h"
#include "compute/gpu/shape_check.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::Status CheckEmbeddingIds(const EmbeddingShape& shape,
                               const int32_t* ids) {
  if (ids == nullptr && shape.ids > 0) {
    return absl::InvalidArgumentError("Embedding: ids are required");
  }
  for (int64_t i = 0; i < shape.ids; ++i) {
    if (ids[i] < 0 || ids[i] >= shape.input_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("Embedding: id ", ids[i], " at position ", i,
                       " is outside [0, ", shape.input_dim, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EmbeddingOp>> EmbeddingOp::Create(
    const EmbeddingShape& shape, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(CheckDims("Embedding",
                                    {{"ids", shape.ids},
                                     {"input_dim", shape.input_dim},
                                     {"output_dim", shape.output_dim}}));
  PSTRAIN_RETURN_IF_ERROR(CheckDevice("Embedding", device));
  return std::unique_ptr<EmbeddingOp>(new EmbeddingOp(shape, device));
}

absl::Status EmbeddingOp::Forward(const int32_t* ids, const float* table,
                                  float* y) {
  if (ids == nullptr || table == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "Embedding forward: ids, table and y are required");
  }
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(LaunchEmbeddingForward(ids, shape_.ids, table,
                                           shape_.output_dim, y,
                                           device_->stream()),
                    "Embedding forward");
}

absl::Status EmbeddingOp::Backward(const int32_t* ids, const float* dy,
                                   float* dtable) {
  if (ids == nullptr || dy == nullptr || dtable == nullptr) {
    return absl::InvalidArgumentError(
        "Embedding backward: ids, dy and dtable are required");
  }
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaMemsetAsync(dtable, 0,
                      sizeof(float) * shape_.input_dim * shape_.output_dim,
                      device_->stream()),
      "Embedding backward: cudaMemsetAsync"));
  return CudaStatus(LaunchEmbeddingBackward(ids, shape_.ids, dy,
                                            shape_.output_dim, dtable,
                                            device_->stream()),
                    "Embedding backward");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
