// What the chief knows of a run while it goes: who has registered, what
// phase the run is in, how far each worker has got, and the training
// figures they report. The chief's service answers from it; the chief's
// driver (chief/driver.h) moves it from phase to phase.
//
// Thread-safe: the service's handlers and the driver call it concurrently.
#ifndef PSTRAIN_CHIEF_RUN_STATE_H_
#define PSTRAIN_CHIEF_RUN_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "proto/chief_service.pb.h"

namespace pstrain {
namespace chief {

// Training figures summed over the reports of a window of steps.
struct Progress {
  int64_t examples = 0;
  double loss_sum = 0;      // sum over reports of loss * examples
  double correct = 0;       // sum over reports of accuracy * examples
  double busy_seconds = 0;  // sum over reports of examples / examples_per_sec
};

class RunState {
 public:
  // `cluster` lists the tasks expected to register (and the ps addresses
  // handed to workers).
  RunState(std::string run_id, TrainingConfig config, Placement placement,
           ClusterSpec cluster, int64_t steps_per_epoch, int64_t total_steps);

  const std::string& run_id() const { return run_id_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return total_steps_; }

  // A ps or worker joins. FAILED_PRECONDITION for another run's id,
  // INVALID_ARGUMENT for a task not in TF_CONFIG.
  absl::StatusOr<RegisterResponse> Register(const RegisterRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<TrainingState> GetTrainingState(
      const GetTrainingStateRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ReportMetricsResponse> ReportMetrics(
      const ReportMetricsRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<TrainingFinishedResponse> TrainingFinished(
      const TrainingFinishedRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  RunPhase phase() const ABSL_LOCKS_EXCLUDED(mu_);
  void SetPhase(RunPhase phase) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every task of the training cluster has registered, or
  // `deadline`; returns the names of those still missing ("worker:1").
  std::vector<std::string> WaitForTasks(absl::Time deadline) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every worker has completed `step` steps (or finished), or
  // `deadline`; returns the lowest completed step count.
  int64_t WaitForStep(int64_t step, absl::Time deadline) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Training (re)starts at `step` (a resumed checkpoint's): every worker is
  // counted as having completed it, and TrainingState.start_step says so.
  // REQUIRES: called before PHASE_TRAINING.
  void StartAt(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t start_step() const ABSL_LOCKS_EXCLUDED(mu_);

  // Announces the step at which every worker holds (0: none) until it is
  // changed; see HeartbeatResponse.pause_at_step.
  void SetPauseAtStep(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  // The earliest step every worker can still hold at: one past the highest
  // step any worker has announced starting (workers heartbeat before each
  // step), announced as the pause step atomically with computing it, so that
  // no worker can start it meanwhile.
  int64_t PauseAtNextStep() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether every worker has said TrainingFinished.
  bool AllWorkersFinished() const ABSL_LOCKS_EXCLUDED(mu_);

  // The figures reported since the last call, and resets them.
  Progress TakeProgress() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status CheckRunId(const RequestHeader& header) const;
  int64_t LowestWorkerStepLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string run_id_;
  const TrainingConfig config_;
  const Placement placement_;
  const ClusterSpec cluster_;
  const int64_t steps_per_epoch_;
  const int64_t total_steps_;

  mutable absl::Mutex mu_;
  RunPhase phase_ ABSL_GUARDED_BY(mu_) = PHASE_WAITING_FOR_TASKS;
  // Registered tasks by name, with their incarnation.
  std::map<std::string, uint64_t> registered_ ABSL_GUARDED_BY(mu_);
  // Completed steps by worker index, and the finished ones.
  std::map<int, int64_t> worker_steps_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> finished_ ABSL_GUARDED_BY(mu_);
  Progress progress_ ABSL_GUARDED_BY(mu_);
  int64_t start_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pause_at_step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_RUN_STATE_H_
