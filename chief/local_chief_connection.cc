#include "chief/local_chief_connection.h"

#include <utility>

#include "common/status_macros.h"

namespace pstrain {
namespace chief {

void LocalChiefConnection::FailNext(int calls, absl::Status status) {
  absl::MutexLock lock(&mu_);
  failures_left_ = calls;
  failure_ = std::move(status);
}

void LocalChiefConnection::Switch(RunState* state) {
  absl::MutexLock lock(&mu_);
  state_ = state;
}

int LocalChiefConnection::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

absl::StatusOr<RunState*> LocalChiefConnection::Next() {
  absl::MutexLock lock(&mu_);
  ++calls_;
  if (failures_left_ > 0) {
    --failures_left_;
    return failure_;
  }
  if (state_ == nullptr) return absl::UnavailableError("the chief is down");
  return state_;
}

absl::StatusOr<RegisterResponse> LocalChiefConnection::Register(
    const RegisterRequest& request, absl::Duration) {
  PSTRAIN_ASSIGN_OR_RETURN(RunState * state, Next());
  return state->Register(request);
}

absl::StatusOr<HeartbeatResponse> LocalChiefConnection::Heartbeat(
    const HeartbeatRequest& request, absl::Duration) {
  PSTRAIN_ASSIGN_OR_RETURN(RunState * state, Next());
  return state->Heartbeat(request);
}

absl::StatusOr<TrainingState> LocalChiefConnection::GetTrainingState(
    const GetTrainingStateRequest& request, absl::Duration) {
  PSTRAIN_ASSIGN_OR_RETURN(RunState * state, Next());
  return state->GetTrainingState(request);
}

absl::StatusOr<ReportMetricsResponse> LocalChiefConnection::ReportMetrics(
    const ReportMetricsRequest& request, absl::Duration) {
  PSTRAIN_ASSIGN_OR_RETURN(RunState * state, Next());
  return state->ReportMetrics(request);
}

absl::StatusOr<TrainingFinishedResponse> LocalChiefConnection::TrainingFinished(
    const TrainingFinishedRequest& request, absl::Duration) {
  PSTRAIN_ASSIGN_OR_RETURN(RunState * state, Next());
  return state->TrainingFinished(request);
}

}  // namespace chief
}  // namespace pstrain
