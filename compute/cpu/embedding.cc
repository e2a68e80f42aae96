#include "compute/cpu/embedding.h"

#include <algorithm>

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

// The rows of a growing table are short (16 floats for the Criteo example)
// and a step gathers thousands of them: a loop the compiler unrolls for the
// width costs less than a library call per row.
template <int64_t kWidth>
void Gather(int64_t n, const int32_t* ids, const float* table, int64_t width,
            float* y) {
  const int64_t w = kWidth > 0 ? kWidth : width;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = table + ids[i] * w;
    for (int64_t j = 0; j < w; ++j) y[i * w + j] = row[j];
  }
}

absl::Status EmbeddingForward(const EmbeddingShape& shape, const int32_t* ids,
                              const float* table, float* y) {
  absl::Status status = CheckArgs("Embedding forward", shape, ids, table, y);
  if (!status.ok()) return status;
  switch (shape.output_dim) {
    case 8:
      Gather<8>(shape.ids, ids, table, 8, y);
      break;
    case 16:
      Gather<16>(shape.ids, ids, table, 16, y);
      break;
    case 32:
      Gather<32>(shape.ids, ids, table, 32, y);
      break;
    default:
      Gather<0>(shape.ids, ids, table, shape.output_dim, y);
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
