// How a ChiefClient's requests reach the chief: over gRPC (ChiefClient's
// channel constructor, every binary) or straight to an in-process RunState
// (chief/local_chief_connection.h, the unit tests of a task's loop). The
// client fills the requests' headers; a connection only carries them.
#ifndef PSTRAIN_CHIEF_CHIEF_CONNECTION_H_
#define PSTRAIN_CHIEF_CHIEF_CONNECTION_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/chief_service.pb.h"

namespace pstrain {
namespace chief {

class ChiefConnection {
 public:
  virtual ~ChiefConnection() = default;

  // Each gives up after `timeout` with DEADLINE_EXCEEDED (or UNAVAILABLE).
  virtual absl::StatusOr<RegisterResponse> Register(
      const RegisterRequest& request, absl::Duration timeout) = 0;
  virtual absl::StatusOr<HeartbeatResponse> Heartbeat(
      const HeartbeatRequest& request, absl::Duration timeout) = 0;
  virtual absl::StatusOr<TrainingState> GetTrainingState(
      const GetTrainingStateRequest& request, absl::Duration timeout) = 0;
  virtual absl::StatusOr<ReportMetricsResponse> ReportMetrics(
      const ReportMetricsRequest& request, absl::Duration timeout) = 0;
  virtual absl::StatusOr<TrainingFinishedResponse> TrainingFinished(
      const TrainingFinishedRequest& request, absl::Duration timeout) = 0;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_CONNECTION_H_
