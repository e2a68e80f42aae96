// How a pstrain binary's Main() gives up, with the exit statuses each binary
// documents in its --help: 2 when what the user gave is wrong (a flag,
// TF_CONFIG, a file a flag names), with that one line alone on stderr, and 1
// when the task itself failed, with a log line naming the task.
//
//   absl::StatusOr<TfConfig> config = ReadTfConfig(...);
//   if (!config.ok()) return FailUsage(config.status().message());
//   absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
//       ServeMetricsOnPort(...);
//   if (!metrics_server.ok()) return FailStart(metrics_server.status(), "ps
//   0");
#ifndef PSTRAIN_COMMON_EXIT_STATUS_H_
#define PSTRAIN_COMMON_EXIT_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// The task failed (common/process.h's LogError said why).
inline constexpr int kExitTaskFailed = 1;
// A bad flag or TF_CONFIG: the one line on stderr says what is wrong.
inline constexpr int kExitBadUsage = 2;

// Writes `message` and a newline to stderr, unadorned (scripts and tests
// read it whole); returns kExitBadUsage.
int FailUsage(absl::string_view message);

// Logs "<task>: <message>" as an error line; returns kExitTaskFailed.
int FailTask(absl::string_view task, absl::string_view message);

// A step of start-up failed with `status` (not OK): INVALID_ARGUMENT is the
// user's input, FailUsage(its message); any other code is FailTask(task,
// its message).
int FailStart(const absl::Status& status, absl::string_view task);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_EXIT_STATUS_H_
