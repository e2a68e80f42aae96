// What an UpdateConfig (proto/training.proto) means where its fields leave
// a choice to the reader: the chief (which writes it) and every ps (which
// applies it) read it through these, so that "0 = all workers" and the
// default step timeout have one definition.
//
//   PSTRAIN_RETURN_IF_ERROR(CheckUpdateConfig(request.update()));
//   const int needed = ReplicasToAggregate(request.update());
//   const absl::Time deadline = absl::Now() + StepTimeout(request.update());
#ifndef PSTRAIN_COMMON_UPDATE_CONFIG_H_
#define PSTRAIN_COMMON_UPDATE_CONFIG_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/training.pb.h"

namespace pstrain {

// How long a sync step may wait for its gradients when the run sets no
// step_timeout_ms: the chief's --step_timeout_seconds default.
inline constexpr absl::Duration kDefaultStepTimeout = absl::Seconds(120);

// INVALID_ARGUMENT naming the field: a mode other than SYNC or ASYNC, fewer
// than one worker, replicas_to_aggregate outside [0, num_workers], a
// negative step timeout.
absl::Status CheckUpdateConfig(const UpdateConfig& update);

// The gradients a sync step sums: replicas_to_aggregate, or every worker
// for 0.
int ReplicasToAggregate(const UpdateConfig& update);

// step_timeout_ms, or `fallback` for 0.
absl::Duration StepTimeout(const UpdateConfig& update,
                           absl::Duration fallback = kDefaultStepTimeout);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_UPDATE_CONFIG_H_
