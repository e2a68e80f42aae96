// The chief's driver: takes a run from start to finish.
//
//   1. waits for every ps and worker of TF_CONFIG to register, logging who is
//      missing, and fails the run after DriverOptions::wait_for_tasks;
//   2. creates and initializes the variables on the ps tasks, then restores
//      the newest good checkpoint of model_dir if there is one (the workers
//      then start at its step);
//   3. lets the workers train, printing a Keras-like progress line every
//      print_every_steps steps and evaluating on the test set at the end of
//      each epoch (or, when TF_CONFIG has an evaluator task, writing a
//      checkpoint there for it to evaluate, and printing what it reports),
//      and writing a checkpoint every checkpoint_every_steps
//      steps or checkpoint_every time (workers hold at the checkpoint's
//      step while the ps tasks save);
//   4. writes a final checkpoint and model_dir/summary.json and tells every
//      process the run is finished, so ps tasks and workers exit.
//
// From step 3 on it logs what it prints for TensorBoard
// (model_dir/{train,validation}/events.out.tfevents.*) and a row per epoch
// to model_dir/history.csv (chief/run_log.h); summary.json carries the same
// per-epoch history.
//
// Failures: a task silent for failure_timeout is logged as presumed dead.
// A worker that restarts goes on by itself from the step it had reached
// (sync steps wait for it meanwhile). A ps task that is silent, or that
// registers as a new process, is asked at its TF_CONFIG address whether it
// still holds its shard: if it does (a partition, a stall, a forged
// Register) nothing is rolled back and the run goes on once it answers; if
// it lost it (it restarted), the driver holds the workers (PHASE_PAUSED),
// waits for every ps task to be up, restores the newest good checkpoint
// onto all of them in a new recovery generation, and lets the workers go
// on from its step, logging how many steps were lost. A ps that cannot be
// reached for wait_for_tasks fails the run. With
// continue_without_dead_workers, a dead worker is not waited for: see
// chief/membership.h. A restarted chief does the same
// at start: the run id comes from model_dir's checkpoints, and the ps
// tasks and workers of the run register again (under
// continue_without_dead_workers, a worker that does not is absent: see
// WaitForTasks).
//
// A run always has a checkpoint to go back to: one of step 0 is written
// before training when model_dir has none.
//
// driver.cc defines the run and its training loop; driver_recovery.cc the
// failure handling; driver_evaluation.cc the evaluations.
#ifndef PSTRAIN_CHIEF_DRIVER_H_
#define PSTRAIN_CHIEF_DRIVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "chief/checkpoint_reader.h"
#include "chief/checkpointer.h"
#include "chief/chief_metrics.h"
#include "chief/criteo_evaluation.h"
#include "chief/evaluation.h"
#include "chief/run_log.h"
#include "chief/run_state.h"
#include "compute/backend.h"
#include "data/dataset.h"
#include "model/keras_model.h"
#include "ps/ps_client.h"

namespace pstrain {
namespace chief {

struct DriverOptions {
  std::string model_dir;
  absl::Duration wait_for_tasks = absl::Minutes(5);
  int64_t print_every_steps = 100;
  // Examples per evaluation batch.
  int64_t eval_batch = 500;
  // How long at most to keep answering after the run is over, until every
  // live process has heard it (in a heartbeat; one cut off a moment ago may
  // take a few seconds to reconnect).
  absl::Duration linger = absl::Seconds(10);
  // A checkpoint every this many steps (0: not by steps).
  int64_t checkpoint_every_steps = 0;
  // A checkpoint every this long (zero: not by time).
  absl::Duration checkpoint_every = absl::ZeroDuration();
  // A task silent for this long is presumed dead.
  absl::Duration failure_timeout = absl::Seconds(10);
  // How long the training loop waits for the workers' steps before it
  // looks again for failed tasks, a stop and a time-based checkpoint (so
  // how soon after it is seen a failure is handled); the waits for tasks to
  // register or come back look at least every 2 x poll. Tests shorten it.
  absl::Duration poll = absl::Milliseconds(500);
  // Sync: go on without a dead worker, the others training its share
  // (chief/membership.h), rather than wait for it to come back.
  bool continue_without_dead_workers = false;
  // TF_CONFIG has an evaluator task: it evaluates the checkpoint written at
  // each epoch's end (chief/evaluator.h) instead of the chief.
  bool evaluator_task = false;
  // How long the summary waits for the evaluator's last evaluation before
  // the chief evaluates the final checkpoint itself.
  absl::Duration evaluator_patience = absl::Minutes(2);
  // Where the run's progress is exposed (null: nowhere); must outlive the
  // Driver.
  ChiefMetrics* metrics = nullptr;
  // Tests: once notified, Run returns CANCELLED at its next look, telling no
  // task anything and writing nothing more, as a chief killed there would
  // (null: never). Must outlive the Driver.
  const absl::Notification* stop = nullptr;
  // --data_format=criteo: the test files, evaluated streamed in batches of
  // eval_batch (chief/criteo_evaluation.h), the evaluator backend computing
  // worker::WithLocalTables(spec, eval_batch); empty: the test set in memory.
  std::vector<std::string> criteo_test_files;
  bool skip_bad_lines = false;
  // A collective run (no ps tasks; the Driver's `ps` is null): the workers
  // hold the variables. Start resumes at the newest good checkpoint (the
  // workers restore it), or writes the one of step 0 through the
  // Checkpointer (whose save_slices writes the replicas' initial values);
  // the later checkpoints are written by worker 0 while the workers hold
  // (Checkpointer::AwaitWorkerSave), one at each epoch's end among them,
  // which the chief evaluates for that epoch's line, as it evaluates the
  // ps tasks' variables in a ps run.
  bool collective = false;
};

class Driver {
 public:
  // All pointers must outlive the Driver.
  Driver(DriverOptions options, RunState* state, const TrainingConfig* config,
         const worker::ModelSpec* spec, ps::PsClusterClient* ps,
         worker::Backend* evaluator, const data::Dataset* test,
         Checkpointer* checkpointer);

  // Runs the whole run; on failure sets PHASE_FAILED and says why.
  absl::Status Run();

  // Pulls the current variables and evaluates them on the test set.
  absl::StatusOr<Evaluation> Evaluate();

 private:
  absl::Status Train();
  // CANCELLED once options_.stop is notified, else OK.
  absl::Status CheckNotStopped() const;
  // Waits for every ps task and worker of TF_CONFIG to register; fails
  // after wait_for_tasks. Under continue_without_dead_workers (sync), once
  // every ps task and a worker are here, a worker still missing
  // failure_timeout later is presumed dead, as a silent one is: the run
  // starts with it absent, and takes it back if it comes. So a restarted
  // chief goes on without the workers that died before it came back.
  absl::Status WaitForTasks();
  // Starts the first generation: restores the newest good checkpoint, if
  // any, in a generation after the ps tasks' own (a restarted chief's ps
  // tasks may be in one already), else writes the checkpoint of step 0.
  absl::Status Start();
  // Start of a collective run: at the newest good checkpoint, if any (the
  // workers restore it), else at step 0.
  absl::Status StartCollective();
  // Collective runs: evaluates the newest good checkpoint's variables.
  absl::StatusOr<Evaluation> EvaluateLatestCheckpoint();
  // Collective runs: evaluates the checkpoint of `step` (an epoch's end).
  absl::StatusOr<Evaluation> EvaluateCollectiveStep(int64_t step);
  // Evaluates the checkpoint in `dir`, or returns its evaluation made
  // before (the last epoch's end is also the run's final checkpoint).
  absl::StatusOr<Evaluation> EvaluateCheckpoint(const std::string& dir,
                                                const CheckpointIndex& index);
  // Collective runs: a worker died or restarted, so its replica is gone
  // (and the others' all-reduce broke): holds the workers, waits for every
  // one to be back, and has all of them restore the newest good checkpoint
  // (the run's seed when there is none) in a new recovery generation.
  absl::Status RecoverCollective(const std::string& why);
  // Brings the run back after a ps task failed (`why`): see the class
  // comment. The run fails if a ps task stays away for wait_for_tasks.
  absl::Status Recover(const std::string& why);
  // Logs newly dead tasks; recovers if a ps task lost its shard, drops
  // dead workers and takes back returning ones under
  // continue_without_dead_workers; in a collective run, recovers from a dead
  // or restarted worker (RecoverCollective). Returns whether it recovered.
  absl::StatusOr<bool> HandleFailures();
  // What ps task `task` says of its shard; *lost says why when kLost.
  enum class PsShard { kIntact, kLost, kUnreachable };
  PsShard ProbePs(int task, std::string* lost);
  // A call to the ps tasks failed (`why`) for want of one: HandleFailures
  // asks each whether it holds its shard, and the caller tries again once
  // none is in doubt.
  void SuspectEveryPs(const std::string& why);
  // The run goes on without worker `dead`: the ps tasks stop waiting for
  // it, and the next present worker trains its share.
  absl::Status DropWorker(int dead);
  // Absent `worker` registered again: at the next step every worker holds
  // at, it trains its own share again.
  absl::Status TakeBack(int worker);
  // Has the ps tasks refuse the pushes of `absent` workers, a sync step
  // waiting for the gradients of the others (and `uncounted` absent ones,
  // for now); returns the step they collect.
  absl::StatusOr<int64_t> SetPsWorkers(const std::vector<int>& absent,
                                       int uncounted = 0);
  // Sync: the ps tasks take this chief's membership, whatever they held
  // before (a restarted chief's ps tasks may still refuse a worker that
  // came back meanwhile).
  absl::Status SetPsMembership();
  // The step-based checkpoint after `step` (0: none before the end).
  int64_t NextCheckpointStep(int64_t step) const;
  // Writes the checkpoint of `step`.
  absl::Status SaveCheckpoint(int64_t step);
  // A progress line at `step`; at an epoch's end (ended_epoch > 0, from 1)
  // with the test-set evaluation (unless the evaluator task does it).
  void PrintProgress(int64_t step, int64_t ended_epoch);
  // Hands a progress line's figures (and at an epoch's end its evaluation,
  // when the chief made one) to run_log_; a failure is logged, not fatal.
  void LogRun(int64_t step, int64_t ended_epoch, const Progress& progress,
              double seconds, const std::optional<Evaluation>& eval);
  // A line per evaluation the evaluator reported since the last call.
  void PrintEvaluatorReports();
  // The evaluation for summary.json: the evaluator's of the final
  // checkpoint, or the chief's own.
  absl::StatusOr<Evaluation> FinalEvaluation();

  const DriverOptions options_;
  RunState* const state_;
  const TrainingConfig* const config_;
  const worker::ModelSpec* const spec_;
  ps::PsClusterClient* const ps_;
  worker::Backend* const evaluator_;
  const data::Dataset* const test_;
  Checkpointer* const checkpointer_;
  // ps tasks presumed dead or registered anew, not yet known to hold their
  // shard, and since when.
  std::map<int, absl::Time> suspect_ps_;
  absl::Time train_start_;
  absl::Time last_print_;
  int64_t last_print_step_ = 0;
  // TensorBoard logs and history (chief/run_log.h), from training on.
  std::unique_ptr<RunLog> run_log_;
  // Collective runs: the last checkpoint evaluated (its directory) and its
  // evaluation.
  std::optional<std::pair<std::string, Evaluation>> last_checkpoint_evaluation_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_DRIVER_H_
