#include "compute/cpu/bf16_copy.h"

#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {

dnnl::memory::desc Bf16Desc(const dnnl::memory::dims& dims,
                            dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::bf16, tag);
}

void Bf16Copy::Init(const dnnl::memory::desc& f32,
                    const dnnl::memory::desc& bf16, Engine* engine) {
  const dnnl::engine& e = engine->dnnl_engine();
  f32_ = UserMemory(f32, e);
  bf16_ = dnnl::memory(bf16, e);
  dnnl::reorder::primitive_desc pd(e, f32, e, bf16, UserScratchpadAttr());
  reorder_ = dnnl::reorder(pd);
  args_ = {{DNNL_ARG_FROM, f32_}, {DNNL_ARG_TO, bf16_}};
  AddScratchpad(pd, e, &args_);
  valid_ = false;
}

absl::Status Bf16Copy::Convert(absl::string_view op, Engine* engine,
                               const float* source) {
  return Guard(op, [&]() -> absl::Status {
    valid_ = false;
    SetHandle(f32_, source);
    absl::Status status = engine->Execute(op, reorder_, args_);
    if (!status.ok()) return status;
    valid_ = true;
    source_ = source;
    ++conversions_;
    return absl::OkStatus();
  });
}

dnnl::memory Bf16Copy::View(const dnnl::memory::desc& view,
                            const dnnl::engine& engine) const {
  return dnnl::memory(view, engine, bf16_.get_data_handle());
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
