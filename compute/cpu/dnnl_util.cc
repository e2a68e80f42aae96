#include "compute/cpu/dnnl_util.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::Status DnnlError(absl::string_view what, const dnnl::error& error) {
  std::string message =
      absl::StrCat(what, ": oneDNN error ", static_cast<int>(error.status),
                   ": ", error.what());
  switch (error.status) {
    case dnnl_invalid_arguments:
      return absl::InvalidArgumentError(message);
    case dnnl_unimplemented:
      return absl::UnimplementedError(message);
    case dnnl_out_of_memory:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status OutOfMemoryError(absl::string_view what) {
  return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory"));
}

absl::Status CheckPositive(absl::string_view op,
                           absl::Span<const NamedSize> sizes) {
  for (const auto& [name, value] : sizes) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " must be positive, got ", value));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNotNull(absl::string_view op, absl::string_view what,
                          const void* pointer) {
  if (pointer != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " is null"));
}

dnnl::memory::desc F32Desc(const dnnl::memory::dims& dims,
                           dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

dnnl::memory UserMemory(const dnnl::memory::desc& desc,
                        const dnnl::engine& engine) {
  return dnnl::memory(desc, engine, DNNL_MEMORY_NONE);
}

dnnl::normalization_flags NormalizationFlags(bool scale, bool center) {
  dnnl::normalization_flags flags = dnnl::normalization_flags::none;
  if (scale) flags |= dnnl::normalization_flags::use_scale;
  if (center) flags |= dnnl::normalization_flags::use_shift;
  return flags;
}

dnnl::primitive_attr UserScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void AddScratchpad(const dnnl::primitive_desc_base& pd,
                   const dnnl::engine& engine,
                   std::unordered_map<int, dnnl::memory>* args) {
  dnnl::memory::desc desc = pd.scratchpad_desc();
  if (desc.get_size() == 0) return;
  (*args)[DNNL_ARG_SCRATCHPAD] = dnnl::memory(desc, engine);
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
