// Why a pull waiting for a variable's next version gives up before it comes:
// each interruption (a restore from a checkpoint, the chief's Interrupt
// when it abandons a step) is counted with its reason. A pull notes the
// count when it starts waiting and gives up when it changes. Guarded by its
// owner's lock (DenseVariable's and EmbeddingTable's mu_).
//
//   const int64_t seen = interruptions_.count();   // under the lock
//   ... wait until the version comes or interruptions_.count() != seen ...
//   if (interruptions_.count() != seen) return interruptions_.GaveUp(name, v);
#ifndef PSTRAIN_PS_INTERRUPTIONS_H_
#define PSTRAIN_PS_INTERRUPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace ps {

class Interruptions {
 public:
  void Add(std::string why) {
    ++count_;
    last_ = std::move(why);
  }
  int64_t count() const { return count_; }

  // ABORTED: variable `name`'s pull waiting for `min_version` gave up, and
  // the last interruption's reason.
  absl::Status GaveUp(absl::string_view name, int64_t min_version) const {
    return absl::AbortedError(absl::StrCat("variable '", name,
                                           "': a pull waiting for version ",
                                           min_version, " gave up: ", last_));
  }

 private:
  int64_t count_ = 0;
  std::string last_;
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_INTERRUPTIONS_H_
