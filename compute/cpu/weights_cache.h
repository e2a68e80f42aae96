// The copy of a weights tensor in the layout a oneDNN primitive prefers,
// reordered from the caller's (Keras) layout at most once per weights
// version.
//
//   WeightsCache cache;
//   cache.Init(hwio_desc, pd.weights_desc(), engine);  // at op creation
//   PSTRAIN_RETURN_IF_ERROR(cache.Prepare("Conv2D", engine, w, step));
//   args[DNNL_ARG_WEIGHTS] = cache.memory();  // the same object every call
//
// When the layouts match, memory() is the caller's buffer itself (no copy).
// Not thread-safe.
#ifndef PSTRAIN_COMPUTE_CPU_WEIGHTS_CACHE_H_
#define PSTRAIN_COMPUTE_CPU_WEIGHTS_CACHE_H_

#include <cstdint>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "compute/cpu/engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

class WeightsCache {
 public:
  // Sets up the cache from the caller's layout `user` to the primitive's
  // `wanted`: the reorder primitive and its buffer, when they differ.
  // May throw dnnl::error: call it inside Guard.
  void Init(const dnnl::memory::desc& user, const dnnl::memory::desc& wanted,
            Engine* engine);

  // Makes memory() hold the values of `weights` (the caller's layout),
  // reordering unless the last Prepare had the same pointer and `version`.
  absl::Status Prepare(absl::string_view op, Engine* engine,
                       const float* weights, uint64_t version);

  // The memory to pass the primitive; the same object on every call.
  const dnnl::memory& memory() const { return reorders_ ? wanted_ : user_; }

  bool reorders() const { return reorders_; }
  int64_t reorder_count() const { return reorder_count_; }

 private:
  bool reorders_ = false;
  dnnl::memory user_;
  dnnl::memory wanted_;
  dnnl::reorder reorder_;
  std::unordered_map<int, dnnl::memory> reorder_args_;
  bool valid_ = false;
  const float* cached_pointer_ = nullptr;
  uint64_t cached_version_ = 0;
  int64_t reorder_count_ = 0;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_WEIGHTS_CACHE_H_
