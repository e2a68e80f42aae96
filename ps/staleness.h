// The refusal of an async gradient computed from too old a version (the
// bounded-delay model: with max_staleness S, a push computed from version v
// is refused once the variable is beyond v + S). The ps sends it as
// FAILED_PRECONDITION with these words; a worker that gets it pulls again
// and computes a fresh gradient instead of giving up.
#ifndef PSTRAIN_PS_STALENESS_H_
#define PSTRAIN_PS_STALENESS_H_

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace pstrain {
namespace ps {

inline constexpr char kStaleGradientMessage[] = " is too stale: ";

inline bool IsStaleGradient(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         absl::StrContains(status.message(), kStaleGradientMessage);
}

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_STALENESS_H_
