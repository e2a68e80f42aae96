// The run's distribution strategy, as TensorFlow names the two that span
// machines: ParameterServerStrategy (ps tasks hold the variables) and
// MultiWorkerMirroredStrategy (no ps: the workers hold the whole model and
// all-reduce their gradients: collective/). As in
// TensorFlow, the cluster spec says which: a TF_CONFIG with a "ps" job is a
// parameter-server run, one with only "chief" and "worker" jobs a collective
// one. The chief's --strategy may name it, and is then checked against the
// cluster.
//
//   PSTRAIN_ASSIGN_OR_RETURN(Strategy strategy,
//       ResolveStrategy(absl::GetFlag(FLAGS_strategy), tf_config.cluster));
#ifndef PSTRAIN_COMMON_STRATEGY_H_
#define PSTRAIN_COMMON_STRATEGY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster_spec.h"

namespace pstrain {

enum class Strategy { kParameterServer, kMultiWorkerMirrored };

// "parameter_server" or "multi_worker_mirrored".
absl::string_view StrategyName(Strategy strategy);

// The strategy of a run on `cluster`, from --strategy's `flag`: "auto" (the
// cluster decides: parameter_server with a "ps" job, else
// multi_worker_mirrored), "parameter_server" or "multi_worker_mirrored".
// INVALID_ARGUMENT, one line starting "--strategy", for another value, for
// parameter_server on a cluster without ps tasks, and for
// multi_worker_mirrored on one with them.
absl::StatusOr<Strategy> ResolveStrategy(absl::string_view flag,
                                         const ClusterSpec& cluster);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_STRATEGY_H_
