// Argument checks shared by the GPU ops' factories, before any GPU work:
// sizes must be positive and fit the `int` that cuDNN and cuBLAS take.
//
//   PSTRAIN_RETURN_IF_ERROR(CheckDims("Dense", {{"batch", shape.batch},
//                                               {"in", shape.in}}));
//   PSTRAIN_RETURN_IF_ERROR(CheckDevice("Dense", device));
#ifndef PSTRAIN_COMPUTE_GPU_SHAPE_CHECK_H_
#define PSTRAIN_COMPUTE_GPU_SHAPE_CHECK_H_

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {
namespace gpu {

// INVALID_ARGUMENT naming `op` and the first size that is not in
// [1, INT32_MAX].
absl::Status CheckDims(absl::string_view op,
                       absl::Span<const cpu::NamedSize> dims);

// INVALID_ARGUMENT naming `op` unless the product of `dims` fits in int32
// (cuDNN tensors and cuBLAS matrices address elements with int).
absl::Status CheckElements(absl::string_view op, absl::string_view what,
                           std::initializer_list<int64_t> dims);

// INVALID_ARGUMENT naming `op` when `device` is null.
absl::Status CheckDevice(absl::string_view op, const void* device);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_SHAPE_CHECK_H_
