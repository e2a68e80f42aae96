// Retrying calls that failed because the peer could not be reached.
//
// gRPC reports UNAVAILABLE when a connection could not be made or broke (a
// peer restarting, a link down for a moment). Such a call is tried again
// after an exponentially growing, jittered pause, so that many clients of
// one restarted server do not all come back at the same instant. Any other
// outcome, success or error, is returned at once. Callers that retry
// requests which must not be applied twice reuse their request id
// (RequestHeader.request_id), which servers recognise.
//
//   PSTRAIN_RETURN_IF_ERROR(Retry(RetryOptions(), [&] { return Call(); }));
#ifndef PSTRAIN_COMMON_RETRY_H_
#define PSTRAIN_COMMON_RETRY_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace pstrain {

struct RetryOptions {
  // Pause before the second attempt; doubled each time up to max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(1);
  // No attempt starts after this long since the first.
  absl::Duration retry_for = absl::Seconds(10);
  // Called before each attempt after the first (a metric's count); may be
  // empty.
  std::function<void()> on_retry;
};

// Whether `status` says a peer failed or went away rather than that the
// request was wrong: UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED (a recovery
// overtook the request) or CANCELLED. What failed this way may succeed once
// the cluster has recovered.
bool IsPeerFailure(const absl::Status& status);

// Runs `attempt` until it returns anything but UNAVAILABLE or retry_for has
// passed; returns its last status.
absl::Status Retry(const RetryOptions& options,
                   const std::function<absl::Status()>& attempt);

// The pause before attempt `attempt` (from 1): initial_backoff * 2^(attempt-1)
// capped at max_backoff, scaled by a random factor in [0.5, 1.5).
absl::Duration Backoff(const RetryOptions& options, int attempt);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RETRY_H_
