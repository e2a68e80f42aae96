#include "compute/cpu/weights_cache.h"

#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {

void WeightsCache::Init(const dnnl::memory::desc& user,
                        const dnnl::memory::desc& wanted, Engine* engine) {
  const dnnl::engine& e = engine->dnnl_engine();
  user_ = UserMemory(user, e);
  reorders_ = user != wanted;
  if (!reorders_) return;
  wanted_ = dnnl::memory(wanted, e);
  dnnl::reorder::primitive_desc pd(e, user, e, wanted, UserScratchpadAttr());
  reorder_ = dnnl::reorder(pd);
  reorder_args_ = {{DNNL_ARG_FROM, user_}, {DNNL_ARG_TO, wanted_}};
  AddScratchpad(pd, e, &reorder_args_);
}

absl::Status WeightsCache::Prepare(absl::string_view op, Engine* engine,
                                   const float* weights, uint64_t version) {
  return Guard(op, [&]() -> absl::Status {
    SetHandle(user_, weights);
    if (!reorders_) return absl::OkStatus();
    if (valid_ && cached_pointer_ == weights && cached_version_ == version) {
      return absl::OkStatus();
    }
    valid_ = false;
    absl::Status status = engine->Execute(op, reorder_, reorder_args_);
    if (!status.ok()) return status;
    valid_ = true;
    cached_pointer_ = weights;
    cached_version_ = version;
    ++reorder_count_;
    return absl::OkStatus();
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
