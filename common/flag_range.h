// The range checks a binary's main.cc makes of its numeric flags, with the
// one error line every binary prints for them (INVALID_ARGUMENT):
//
//   "--pull_threads: 0 must be >= 1"
//   "--port: 70000 must be in [0, 65535]"
//
//   PSTRAIN_RETURN_IF_ERROR(FlagInRange("threads", threads, 0, kMaxThreads));
#ifndef PSTRAIN_COMMON_FLAG_RANGE_H_
#define PSTRAIN_COMMON_FLAG_RANGE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// The most threads a --threads or --pull_threads flag may ask for: far
// beyond any host's cores, and short of what a process can start (thread
// creation fails, and the process aborts, in the tens of thousands).
inline constexpr int kMaxThreads = 1024;

// OK when value >= min.
absl::Status FlagAtLeast(absl::string_view flag, int64_t value, int64_t min);
// OK when min <= value <= max.
absl::Status FlagInRange(absl::string_view flag, int64_t value, int64_t min,
                         int64_t max);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_FLAG_RANGE_H_
