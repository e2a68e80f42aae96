#include "common/update_config.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status CheckUpdateConfig(const UpdateConfig& update) {
  if (update.mode() != UpdateConfig::SYNC &&
      update.mode() != UpdateConfig::ASYNC) {
    return absl::InvalidArgumentError("update.mode: must be SYNC or ASYNC");
  }
  if (update.num_workers() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.num_workers: ", update.num_workers(), " must be >= 1"));
  }
  if (update.replicas_to_aggregate() < 0 ||
      update.replicas_to_aggregate() > update.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.replicas_to_aggregate: ", update.replicas_to_aggregate(),
        " must be in [0, num_workers ", update.num_workers(), "]"));
  }
  if (update.step_timeout_ms() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.step_timeout_ms: ", update.step_timeout_ms(), " is negative"));
  }
  return absl::OkStatus();
}

int ReplicasToAggregate(const UpdateConfig& update) {
  return update.replicas_to_aggregate() > 0 ? update.replicas_to_aggregate()
                                            : update.num_workers();
}

absl::Duration StepTimeout(const UpdateConfig& update,
                           absl::Duration fallback) {
  return update.step_timeout_ms() > 0
             ? absl::Milliseconds(update.step_timeout_ms())
             : fallback;
}

}  // namespace pstrain
