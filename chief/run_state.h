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
#include <optional>
#include <set>
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
  // Binary cross-entropy: sum over the reports with a training AUC (over
  // their own window) of auc * examples, and those reports' examples.
  double auc_sum = 0;
  int64_t auc_examples = 0;
};

class RunState {
 public:
  // `cluster` lists the tasks expected to register (and the ps addresses
  // handed to workers). In a `collective` run a worker that restarts lost its
  // replica: it waits for the chief's restore (TrainingState.restore_pending).
  RunState(std::string run_id, TrainingConfig config, Placement placement,
           ClusterSpec cluster, int64_t steps_per_epoch, int64_t total_steps,
           bool collective = false);

  const std::string& run_id() const { return run_id_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return total_steps_; }

  // A ps, worker or evaluator joins, or joins again after it restarted (a new
  // incarnation; logged) or after the chief restarted. FAILED_PRECONDITION
  // for another run's id, INVALID_ARGUMENT for a task not in TF_CONFIG, and
  // for a worker whose all-reduce backend or dtype (RegisterRequest.
  // allreduce_backend) differs from the first worker's that gave one,
  // naming both.
  // The other requests are NOT_FOUND from a task that is not registered.
  // NCCL's NCCL_UNIQUE_ID_BYTES is 128.
  static constexpr size_t kMaxNcclUniqueIdBytes = 128;

  absl::StatusOr<RegisterResponse> Register(const RegisterRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps the ncclUniqueId worker 0 sends for the current generation and
  // hands it to every worker (HeartbeatResponse.nccl_unique_id);
  // INVALID_ARGUMENT for one from another task or over
  // kMaxNcclUniqueIdBytes.
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

  // The step the current generation started at (see Recovered).
  int64_t start_step() const ABSL_LOCKS_EXCLUDED(mu_);

  // Announces the step at which every worker holds (0: none) until it is
  // changed; see HeartbeatResponse.pause_at_step.
  void SetPauseAtStep(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  // The earliest step every worker can still hold at: one past the highest
  // step any worker has announced starting (workers heartbeat before each
  // step), announced as the pause step atomically with computing it, so that
  // no worker can start it meanwhile.
  int64_t PauseAtNextStep() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every registered task not presumed dead has been told the
  // run is over (a reply with PHASE_FINISHED or PHASE_FAILED), or
  // `deadline`; returns whether all were.
  bool WaitUntilToldOver(absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);

  // Every registered task by name ("worker:1"): whether it is alive (not
  // presumed dead).
  std::map<std::string, bool> TasksAlive() const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether every worker has said TrainingFinished.
  bool AllWorkersFinished() const ABSL_LOCKS_EXCLUDED(mu_);

  // Failure detection. Every request of a task counts as a sign of life.
  // Returns the tasks newly found dead: registered, not finished nor
  // absent, and silent for `timeout`. A dead task that is heard from again
  // is alive again.
  std::vector<TaskRef> FindDeadTasks(absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The ps tasks that registered again with another incarnation (a
  // restart, or a caller claiming one) since the last call or recovery.
  // Whether such a ps lost its shard is for the driver to ask it.
  std::vector<int> TakeRestartedPs() ABSL_LOCKS_EXCLUDED(mu_);
  // The same for workers (a collective run restores every worker when one
  // restarted: its replica is gone).
  std::vector<int> TakeRestartedWorkers() ABSL_LOCKS_EXCLUDED(mu_);
  // `task` answered the chief (a sign of life, as a request is).
  void HeardFrom(const TaskRef& task) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until every ps task has been heard from within `timeout` of now,
  // or `deadline`; returns those still silent ("ps:1").
  std::vector<std::string> WaitForLivePs(absl::Duration timeout,
                                         absl::Time deadline) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The recovery generation (RequestHeader.generation); requests of
  // another one carry no step.
  int64_t generation() const ABSL_LOCKS_EXCLUDED(mu_);
  // The ps tasks now serve `generation`, restored at `step`: every worker
  // goes on from there (HeartbeatResponse.resume_step), absent workers'
  // batches are owed from there, and no ps counts as restarted
  // (TakeRestartedPs). Does not change the phase.
  void Recovered(int64_t step, int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // --on_worker_failure=continue: the workers presumed dead and who trains
  // their share (chief/membership.h). Absent workers are not waited for
  // (WaitForStep, AllWorkersFinished) nor found dead again.
  Membership membership() const ABSL_LOCKS_EXCLUDED(mu_);
  void SetMembership(Membership membership) ABSL_LOCKS_EXCLUDED(mu_);
  // Absent workers that registered again since the last call.
  std::vector<int> TakeReturnedWorkers() ABSL_LOCKS_EXCLUDED(mu_);
  // `worker` goes on from `step` (TrainingState.start_step).
  void SetWorkerStep(int worker, int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t pause_at_step() const ABSL_LOCKS_EXCLUDED(mu_);

  // The evaluator task's reports (ReportMetricsRequest.evaluation).
  struct EvaluationReport {
    int64_t step = 0;
    double loss = 0;
    double accuracy = 0;
    std::optional<double> auc;  // ReportMetricsRequest.auc, when set.
  };
  // The reports received since the last call, by step.
  std::vector<EvaluationReport> TakeEvaluations() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the evaluator's report of `step` until `deadline`.
  std::optional<EvaluationReport> WaitForEvaluation(int64_t step,
                                                    absl::Time deadline) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The figures reported since the last call, and resets them.
  Progress TakeProgress() ABSL_LOCKS_EXCLUDED(mu_);
  // The figures of the reports of epoch `epoch` (from 0; a report counts in
  // the epoch of its step), once every worker still training reported that
  // epoch's last step, or at `deadline`; the epoch's sums (and any earlier
  // epoch's) are then dropped. Workers end a report window at each epoch's
  // end (worker/trainer.h), so no report straddles two epochs.
  Progress TakeEpochProgress(int64_t epoch, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What the chief knows of a registered task's life.
  struct Task {
    TaskRef ref;
    uint64_t incarnation = 0;
    absl::Time last_seen;
    bool dead = false;
    // Whether a reply has told it the run is over (PHASE_FINISHED or
    // PHASE_FAILED).
    bool told_over = false;
  };

  absl::Status CheckRunId(const RequestHeader& header) const;
  bool RunOverLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  int64_t LowestWorkerStepLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Notes a sign of life of the sender; NOT_FOUND if it is not registered
  // (the chief restarted since: it must register again).
  absl::Status SeenLocked(const RequestHeader& header)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the request's worker step counts: a worker of this cluster, in
  // this generation.
  bool CountsStepLocked(const RequestHeader& header) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string run_id_;
  const TrainingConfig config_;
  const Placement placement_;
  const ClusterSpec cluster_;
  const int64_t steps_per_epoch_;
  const int64_t total_steps_;
  const bool collective_;
  // M of the mesh: the members of a model-parallel group each report their
  // group's batch, counted as its M-th.
  const int model_size_;

  mutable absl::Mutex mu_;
  RunPhase phase_ ABSL_GUARDED_BY(mu_) = PHASE_WAITING_FOR_TASKS;
  // Registered tasks by name.
  std::map<std::string, Task> registered_ ABSL_GUARDED_BY(mu_);
  // The first worker that registered an all-reduce backend ("worker:0"),
  // and its backend and dtype; every later one must match them.
  std::string allreduce_first_ ABSL_GUARDED_BY(mu_);
  std::string allreduce_backend_ ABSL_GUARDED_BY(mu_);
  std::string allreduce_dtype_ ABSL_GUARDED_BY(mu_);
  std::vector<int> restarted_ps_ ABSL_GUARDED_BY(mu_);
  std::vector<int> restarted_workers_ ABSL_GUARDED_BY(mu_);
  // Collective runs: the workers that restarted since the last recovery
  // (TrainingState.restore_pending).
  std::set<int> restore_pending_ ABSL_GUARDED_BY(mu_);
  Membership membership_ ABSL_GUARDED_BY(mu_);
  std::vector<int> returned_workers_ ABSL_GUARDED_BY(mu_);
  // Evaluator reports by step, and the steps not taken yet.
  std::map<int64_t, EvaluationReport> evaluations_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> untaken_evaluations_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The ncclUniqueId worker 0 published (HeartbeatRequest.nccl_unique_id)
  // and its generation (-1: none).
  std::string nccl_unique_id_ ABSL_GUARDED_BY(mu_);
  int64_t nccl_generation_ ABSL_GUARDED_BY(mu_) = -1;
  // Completed steps by worker index, and the finished ones.
  std::map<int, int64_t> worker_steps_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> finished_ ABSL_GUARDED_BY(mu_);
  Progress progress_ ABSL_GUARDED_BY(mu_);
  // Report figures by epoch, and the last step each worker reported.
  std::map<int64_t, Progress> epoch_progress_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> reported_steps_ ABSL_GUARDED_BY(mu_);
  int64_t start_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pause_at_step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_RUN_STATE_H_
