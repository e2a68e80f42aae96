// Helpers the CPU ops share for talking to oneDNN: turning its exceptions
// into absl::Status, memory descriptors for our layouts, memory objects
// whose data handle is set per call, and user-managed scratchpads.
//
// oneDNN's C++ API throws dnnl::error (and allocation std::bad_alloc); every
// op runs its oneDNN calls inside Guard, so no exception leaves our API:
//
//   return Guard("Conv2D forward", [&]() -> absl::Status { ...; });
#ifndef PSTRAIN_COMPUTE_CPU_DNNL_UTIL_H_
#define PSTRAIN_COMPUTE_CPU_DNNL_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <new>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compute/cpu/op_shapes.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// The oneDNN names the CPU ops write unqualified (memory::desc, Tag::nhwc).
using dnnl::memory;
using Tag = dnnl::memory::format_tag;

// A status for `error` thrown by oneDNN while `what` (e.g. "Conv2D forward:
// create") ran: INVALID_ARGUMENT, UNIMPLEMENTED, RESOURCE_EXHAUSTED or
// INTERNAL depending on oneDNN's status code; the message names both.
absl::Status DnnlError(absl::string_view what, const dnnl::error& error);

// RESOURCE_EXHAUSTED naming `what`.
absl::Status OutOfMemoryError(absl::string_view what);

// Runs `body` (returning absl::Status) and turns a dnnl::error or
// std::bad_alloc it throws into a status naming `what`.
template <typename Body>
absl::Status Guard(absl::string_view what, Body&& body) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    return DnnlError(what, e);
  } catch (const std::bad_alloc&) {
    return OutOfMemoryError(what);
  }
}

// INVALID_ARGUMENT naming `op` and the first of `sizes` (name, value) whose
// value is not positive.
absl::Status CheckPositive(absl::string_view op,
                           absl::Span<const NamedSize> sizes);

// INVALID_ARGUMENT naming `op` and `what` if `pointer` is null.
absl::Status CheckNotNull(absl::string_view op, absl::string_view what,
                          const void* pointer);

// f32 memory descriptor of logical `dims` in format `tag`.
dnnl::memory::desc F32Desc(const dnnl::memory::dims& dims,
                           dnnl::memory::format_tag tag);

// A memory object over caller-owned data: created without a buffer, its
// handle is set by SetHandle before each execution.
dnnl::memory UserMemory(const dnnl::memory::desc& desc,
                        const dnnl::engine& engine);

// Points `memory` at `data`; oneDNN takes a non-const handle even for inputs,
// which it only reads.
inline void SetHandle(const dnnl::memory& memory, const float* data) {
  memory.set_data_handle(const_cast<float*>(data));
}

// The flags of a Keras normalization (BatchNormalization,
// LayerNormalization) with gamma iff `scale` and beta iff `center`.
dnnl::normalization_flags NormalizationFlags(bool scale, bool center);

// An attribute that makes the primitive use the scratchpad we pass it,
// allocated once per op, instead of one managed by the library.
dnnl::primitive_attr UserScratchpadAttr();

// Allocates `pd`'s scratchpad (once, at op creation) and adds it to `args`;
// nothing when the primitive needs none.
void AddScratchpad(const dnnl::primitive_desc_base& pd,
                   const dnnl::engine& engine,
                   std::unordered_map<int, dnnl::memory>* args);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_DNNL_UTIL_H_
