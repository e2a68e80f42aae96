#include "compute/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

absl::Status CheckArgs(const char* op, const EmbeddingShape& shape,
                       const int32_t* ids, const void* in, const void* out) {
  absl::Status status = CheckPositive(op, {{"ids", shape.ids},
                                           {"input_dim", shape.input_dim},
                                           {"output_dim", shape.output_dim}});
  if (!status.ok()) return status;
  if (ids == nullptr || in == nullptr || out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ids, input and output are required"));
  }
  for (int64_t i = 0; i < shape.ids; ++i) {
    if (ids[i] < 0 || ids[i] >= shape.input_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": id ", ids[i], " at position ", i,
                       " is outside [0, ", shape.input_dim, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EmbeddingForward(const EmbeddingShape& shape, const int32_t* ids,
                              const float* table, float* y) {
  absl::Status status = CheckArgs("Embedding forward", shape, ids, table, y);
  if (!status.ok()) return status;
  const int64_t width = shape.output_dim;
  for (int64_t i = 0; i < shape.ids; ++i) {
    std::memcpy(y + i * width, table + ids[i] * width, width * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status EmbeddingBackward(const EmbeddingShape& shape, const int32_t* ids,
                               const float* dy, float* dtable) {
  absl::Status status = CheckArgs("Embedding backward", shape, ids, dy, dtable);
  if (!status.ok()) return status;
  const int64_t width = shape.output_dim;
  std::fill(dtable, dtable + shape.input_dim * width, 0.0f);
  for (int64_t i = 0; i < shape.ids; ++i) {
    float* row = dtable + ids[i] * width;
    const float* g = dy + i * width;
    for (int64_t j = 0; j < width; ++j) row[j] += g[j];
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
