// A ChiefConnection straight to an in-process RunState: the chief's own
// bookkeeping without a network, for unit tests of a task's loop (as
// TensorFlow's distributed runtime tests its workers against an in-process
// master). It can be told to fail calls, as an unreachable chief does, or
// be pointed at another RunState, as a restarted chief is.
//
//   RunState state(...);
//   auto connection = std::make_unique<LocalChiefConnection>(&state);
//   LocalChiefConnection* chief_side = connection.get();
//   ChiefClient client(std::move(connection), MakeTask(JOB_WORKER, 0));
//   chief_side->FailNext(2, absl::UnavailableError("chief down"));
//
// Thread-safe.
#ifndef PSTRAIN_CHIEF_LOCAL_CHIEF_CONNECTION_H_
#define PSTRAIN_CHIEF_LOCAL_CHIEF_CONNECTION_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "chief/chief_connection.h"
#include "chief/run_state.h"

namespace pstrain {
namespace chief {

class LocalChiefConnection : public ChiefConnection {
 public:
  // `state` must outlive the calls made to it; null: the chief is down
  // (every call UNAVAILABLE).
  explicit LocalChiefConnection(RunState* state) : state_(state) {}

  // The next `calls` calls fail with `status` without reaching the chief.
  void FailNext(int calls, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Later calls go to `state` (a restarted chief; null: a chief down).
  void Switch(RunState* state) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls made so far, failed ones included.
  int calls() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<RegisterResponse> Register(const RegisterRequest& request,
                                            absl::Duration timeout) override;
  absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request,
                                              absl::Duration timeout) override;
  absl::StatusOr<TrainingState> GetTrainingState(
      const GetTrainingStateRequest& request, absl::Duration timeout) override;
  absl::StatusOr<ReportMetricsResponse> ReportMetrics(
      const ReportMetricsRequest& request, absl::Duration timeout) override;
  absl::StatusOr<TrainingFinishedResponse> TrainingFinished(
      const TrainingFinishedRequest& request, absl::Duration timeout) override;

 private:
  // The RunState to call, or the injected failure.
  absl::StatusOr<RunState*> Next() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  RunState* state_ ABSL_GUARDED_BY(mu_);
  int failures_left_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_LOCAL_CHIEF_CONNECTION_H_
