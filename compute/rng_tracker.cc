#include "compute/rng_tracker.h"

#include "absl/strings/str_cat.h"
#include "common/derived_seed.h"

namespace pstrain {
namespace worker {

uint64_t RngTracker::GlobalSeed(absl::string_view name) const {
  return DeriveSeed(run_seed_, absl::StrCat("rng/global/", name));
}

uint64_t RngTracker::LocalSeed(absl::string_view name) const {
  return DeriveSeed(run_seed_, absl::StrCat("rng/local/", replica_, "/", name));
}

}  // namespace worker
}  // namespace pstrain
