#include "common/exit_status.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/process.h"

namespace pstrain {

int FailUsage(absl::string_view message) {
  std::cerr << message << std::endl;
  return kExitBadUsage;
}

int FailTask(absl::string_view task, absl::string_view message) {
  LogError(absl::StrCat(task, ": ", message));
  return kExitTaskFailed;
}

int FailStart(const absl::Status& status, absl::string_view task) {
  if (absl::IsInvalidArgument(status)) return FailUsage(status.message());
  return FailTask(task, status.message());
}

}  // namespace pstrain
