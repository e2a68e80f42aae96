// Writing tensors as a safetensors file (https://github.com/huggingface/
// safetensors), the format PyTorch, JAX and Keras tools load:
//
//   8 bytes   N, the header's length, unsigned little-endian
//   N bytes   JSON: {"<name>": {"dtype": "F32", "shape": [...],
//             "data_offsets": [begin, end]}, ..., "__metadata__": {...}},
//             padded with spaces to a multiple of 8
//   ...       the tensors' raw little-endian bytes; offsets are relative to
//             the end of the header
//
//   PSTRAIN_RETURN_IF_ERROR(WriteSafetensors(path, variables));
#ifndef PSTRAIN_CHIEF_SAFETENSORS_H_
#define PSTRAIN_CHIEF_SAFETENSORS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chief/checkpoint_reader.h"

namespace pstrain {
namespace chief {

// The whole file's bytes for `tensors`, in their order, with metadata
// {"format": "pt"}. INVALID_ARGUMENT for a dtype safetensors has no name for,
// or data whose size does not match the shape.
absl::StatusOr<std::string> SafetensorsBytes(
    absl::Span<const WholeVariable> tensors);

// Writes SafetensorsBytes(tensors) to `path`, atomically. Replaces an
// earlier export there, but nothing else: FAILED_PRECONDITION naming the
// path when it is a directory, not a regular file, or a file that is not a
// safetensors file (a checkpoint's index.pb, a summary.json, a mistyped
// path's file), which stays as it was.
absl::Status WriteSafetensors(const std::string& path,
                              absl::Span<const WholeVariable> tensors);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_SAFETENSORS_H_
