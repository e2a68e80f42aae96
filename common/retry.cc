#include "common/retry.h"

#include <algorithm>
#include <random>

#include "absl/time/clock.h"

namespace pstrain {

absl::Duration Backoff(const RetryOptions& options, int attempt) {
  thread_local std::mt19937_64 random{std::random_device()()};
  absl::Duration pause = options.initial_backoff;
  for (int i = 1; i < attempt && pause < options.max_backoff; ++i) pause *= 2;
  pause = std::min(pause, options.max_backoff);
  return pause * std::uniform_real_distribution<double>(0.5, 1.5)(random);
}

bool IsPeerFailure(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsAborted(status) || absl::IsCancelled(status);
}

absl::Status Retry(const RetryOptions& options,
                   const std::function<absl::Status()>& attempt) {
  const absl::Time give_up = absl::Now() + options.retry_for;
  for (int tries = 1;; ++tries) {
    absl::Status status = attempt();
    if (!absl::IsUnavailable(status)) return status;
    const absl::Duration pause = Backoff(options, tries);
    if (absl::Now() + pause > give_up) return status;
    absl::SleepFor(pause);
    if (options.on_retry) options.on_retry();
  }
}

}  // namespace pstrain
