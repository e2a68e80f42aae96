#include "common/strategy.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::string_view StrategyName(Strategy strategy) {
  return strategy == Strategy::kParameterServer ? "parameter_server"
                                                : "multi_worker_mirrored";
}

absl::StatusOr<Strategy> ResolveStrategy(absl::string_view flag,
                                         const ClusterSpec& cluster) {
  const int num_ps = cluster.NumTasks(JOB_PS);
  if (flag == "auto") {
    return num_ps > 0 ? Strategy::kParameterServer
                      : Strategy::kMultiWorkerMirrored;
  }
  if (flag == "parameter_server") {
    if (num_ps == 0) {
      return absl::InvalidArgumentError(
          "--strategy=parameter_server: TF_CONFIG's cluster has no \"ps\" "
          "job (a cluster of only \"chief\" and \"worker\" jobs is "
          "multi_worker_mirrored)");
    }
    return Strategy::kParameterServer;
  }
  if (flag == "multi_worker_mirrored") {
    if (num_ps > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--strategy=multi_worker_mirrored: TF_CONFIG's cluster has a "
          "\"ps\" job (",
          num_ps, num_ps == 1 ? " task" : " tasks",
          "); the workers all-reduce among themselves, so list only "
          "\"chief\" and \"worker\" jobs"));
    }
    return Strategy::kMultiWorkerMirrored;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--strategy: \"", flag,
                   "\" is not parameter_server, multi_worker_mirrored or auto"));
}

}  // namespace pstrain
