// A bf16 copy of a float32 tensor, in a buffer the copy owns, for the
// bf16 mixed-precision ops (compute/precision.h): Conv2D and Dense convert
// their float32 activations (and Dense its kernel) once per Forward and
// reuse the copy in the Backward that follows.
//
//   Bf16Copy x_bf16;
//   x_bf16.Init(F32Desc(dims, tag), Bf16Desc(dims, tag), engine);  // Create
//   PSTRAIN_RETURN_IF_ERROR(x_bf16.Convert("Dense forward", engine, x));
//   args[DNNL_ARG_SRC] = x_bf16.memory();  // the same object every call
//   ...
//   if (!x_bf16.Holds(x)) { ...Convert again... }  // in Backward
//
// The conversion is a oneDNN reorder (round to nearest even). Holds(p) says
// whether the copy was last converted from p and not invalidated since: the
// caller decides whether p's values may have changed in between. Not
// thread-safe.
#ifndef PSTRAIN_COMPUTE_CPU_BF16_COPY_H_
#define PSTRAIN_COMPUTE_CPU_BF16_COPY_H_

#include <cstdint>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "compute/cpu/engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// bf16 memory descriptor of logical `dims` in format `tag`.
dnnl::memory::desc Bf16Desc(const dnnl::memory::dims& dims,
                            dnnl::memory::format_tag tag);

class Bf16Copy {
 public:
  // Allocates the bf16 buffer of `bf16` and the reorder into it from a
  // float32 tensor laid out as `f32`. May throw dnnl::error: call it inside
  // Guard.
  void Init(const dnnl::memory::desc& f32, const dnnl::memory::desc& bf16,
            Engine* engine);

  // Converts `source` (laid out as Init's `f32`) into memory(). Errors name
  // `op`.
  absl::Status Convert(absl::string_view op, Engine* engine,
                       const float* source);

  // Whether memory() holds the conversion of `source`, the last Convert's
  // argument, with no Invalidate since.
  bool Holds(const float* source) const { return valid_ && source_ == source; }
  void Invalidate() { valid_ = false; }

  // The bf16 tensor; the same object on every call.
  const dnnl::memory& memory() const { return bf16_; }
  // A memory over the same bf16 buffer read through `view` (e.g. the same
  // matrix transposed by strides). May throw dnnl::error.
  dnnl::memory View(const dnnl::memory::desc& view,
                    const dnnl::engine& engine) const;

  int64_t conversions() const { return conversions_; }

 private:
  dnnl::memory f32_;
  dnnl::memory bf16_;
  dnnl::reorder reorder_;
  std::unordered_map<int, dnnl::memory> args_;
  bool valid_ = false;
  const float* source_ = nullptr;
  int64_t conversions_ = 0;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_BF16_COPY_H_
