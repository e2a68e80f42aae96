// The refusal of an async gradient computed from too old a version (the
// bounded-delay model: with max_staleness S, a push computed from version v
// is refused once the variable is beyond v + S). The ps sends it as
// FAILED_PRECONDITION carrying the payload kStaleGradientPayload, which
// survives the wire (common/grpc_status.h); a worker that gets it pulls
// again and computes a fresh gradient instead of giving up.
#ifndef PSTRAIN_PS_STALENESS_H_
#define PSTRAIN_PS_STALENESS_H_

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace ps {

inline constexpr char kStaleGradientPayload[] = "type.pstrain/ps.StaleGradient";

// FAILED_PRECONDITION saying `message`, marked as a stale gradient.
inline absl::Status StaleGradientError(absl::string_view message) {
  absl::Status status = absl::FailedPreconditionError(message);
  status.SetPayload(kStaleGradientPayload, absl::Cord());
  return status;
}

inline bool IsStaleGradient(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         status.GetPayload(kStaleGradientPayload).has_value();
}

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_STALENESS_H_
