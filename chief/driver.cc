#include "chief/driver.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chief/checkpoint_reader.h"
#include "chief/membership.h"
#include "chief/model_summary.h"
#include "common/atomic_file.h"
#include "common/process.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "common/update_config.h"

namespace pstrain {
namespace chief {
namespace {

std::string Clock(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace

Driver::Driver(DriverOptions options, RunState* state,
               const TrainingConfig* config, const worker::ModelSpec* spec,
               ps::PsClusterClient* ps, worker::Backend* evaluator,
               const data::Dataset* test, Checkpointer* checkpointer)
    : options_(std::move(options)),
      state_(state),
      config_(config),
      spec_(spec),
      ps_(ps),
      evaluator_(evaluator),
      test_(test),
      checkpointer_(checkpointer) {}

absl::Status Driver::Start() {
  if (options_.collective) return StartCollective();
  int64_t generation = 0;
  for (int task = 0; task < ps_->num_ps(); ++task) {
    PSTRAIN_ASSIGN_OR_RETURN(ShardStatus status,
                             ps_->client(task)->GetShardStatus());
    generation = std::max(generation, status.generation());
  }
  absl::StatusOr<LoadedCheckpoint> restored =
      checkpointer_->RestoreLatest(generation + 1);
  if (absl::IsNotFound(restored.status())) {
    ps_->set_generation(generation);
    state_->Recovered(0, generation);
    return SaveCheckpoint(0);
  }
  PSTRAIN_RETURN_IF_ERROR(restored.status());
  const int64_t step = restored->index.step();
  if (step > state_->total_steps()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", restored->dir, " is at step ", step,
        ", past this run's ", state_->total_steps(), " steps"));
  }
  LogInfo(absl::StrCat("chief: resuming from ", restored->dir, " at step ",
                       step));
  ps_->set_generation(generation + 1);
  state_->Recovered(step, generation + 1);
  return absl::OkStatus();
}

absl::Status Driver::Recover(const std::string& why) {
  const absl::Time began = absl::Now();
  if (options_.metrics != nullptr) options_.metrics->CountRestore();
  const int64_t reached = state_->WaitForStep(0, began);
  state_->SetPhase(PHASE_PAUSED);
  LogError(absl::StrCat("chief: ", why, " at step ", reached,
                        "; holding the workers until every ps task is up"));
  const std::vector<std::string> missing = state_->WaitForLivePs(
      options_.failure_timeout, began + options_.wait_for_tasks);
  if (!missing.empty()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "after ", absl::FormatDuration(options_.wait_for_tasks), " ",
        absl::StrJoin(missing, ", "), " did not come back"));
  }
  PSTRAIN_RETURN_IF_ERROR(
      ps_->CreateVariables(config_->optimizer(), config_->update()));
  const int64_t generation = state_->generation() + 1;
  PSTRAIN_ASSIGN_OR_RETURN(LoadedCheckpoint restored,
                           checkpointer_->RestoreLatest(generation));
  const int64_t step = restored.index.step();
  ps_->set_generation(generation);
  state_->Recovered(step, generation);
  PSTRAIN_RETURN_IF_ERROR(SetPsMembership());
  state_->SetPhase(PHASE_TRAINING);
  LogInfo(absl::StrFormat(
      "chief: recovered in %.1f s: restored %s at step %d (generation %d); "
      "%d steps are trained again",
      absl::ToDoubleSeconds(absl::Now() - began), restored.dir, step,
      generation, std::max<int64_t>(0, reached - step)));
  return absl::OkStatus();
}

absl::Status Driver::RecoverCollective(const std::string& why) {
  const absl::Time began = absl::Now();
  const int64_t reached = state_->WaitForStep(0, began);
  LogError(absl::StrCat("chief: ", why,
                        "; holding the workers until every "
                        "one is back, then all restore the newest checkpoint"));
  state_->SetPhase(PHASE_PAUSED);
  const int num_workers = config_->update().num_workers();
  for (;;) {
    state_->FindDeadTasks(options_.failure_timeout);
    const std::map<std::string, bool> alive = state_->TasksAlive();
    int back = 0;
    for (int w = 0; w < num_workers; ++w) {
      auto it = alive.find(TaskName(MakeTask(JOB_WORKER, w)));
      if (it != alive.end() && it->second) ++back;
    }
    if (back == num_workers) break;
    if (absl::Now() - began > options_.wait_for_tasks) {
      return absl::DeadlineExceededError(
          absl::StrCat("collective run: ", num_workers - back, " of ",
                       num_workers, " workers did not come back within ",
                       absl::FormatDuration(options_.wait_for_tasks)));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  int64_t step = 0;
  std::string from = "the run's seed";
  absl::StatusOr<LoadedCheckpoint> latest = FindLatestGoodCheckpoint(
      options_.model_dir,
      [](absl::string_view line) { LogError(absl::StrCat("chief: ", line)); });
  if (latest.ok()) {
    step = latest->index.step();
    from = latest->dir;
  } else if (!absl::IsNotFound(latest.status())) {
    return latest.status();
  }
  const int64_t generation = state_->generation() + 1;
  state_->Recovered(step, generation);
  state_->SetPhase(PHASE_TRAINING);
  LogInfo(absl::StrFormat(
      "chief: recovered in %.1f s: every worker restores %s at step %d "
      "(generation %d); %d steps are trained again",
      absl::ToDoubleSeconds(absl::Now() - began), from, step, generation,
      std::max<int64_t>(0, reached - step)));
  return absl::OkStatus();
}

absl::StatusOr<bool> Driver::HandleFailures() {
  const bool sync = config_->update().mode() == UpdateConfig::SYNC;
  const absl::Time now = absl::Now();
  if (options_.collective) {
    std::string why;
    for (const TaskRef& task :
         state_->FindDeadTasks(options_.failure_timeout)) {
      if (options_.metrics != nullptr) options_.metrics->CountFailure("worker");
      why = absl::StrCat(TaskName(task), " sent nothing for ",
                         absl::FormatDuration(options_.failure_timeout),
                         "; presumed dead");
    }
    for (int worker : state_->TakeRestartedWorkers()) {
      why = absl::StrCat(TaskName(MakeTask(JOB_WORKER, worker)), " restarted");
    }
    if (why.empty()) return false;
    PSTRAIN_RETURN_IF_ERROR(RecoverCollective(why));
    return true;
  }
  for (const TaskRef& task :
       state_->FindDeadTasks(options_.failure_timeout)) {
    LogError(absl::StrCat("chief: ", TaskName(task), " sent nothing for ",
                          absl::FormatDuration(options_.failure_timeout),
                          "; presumed dead"));
    if (options_.metrics != nullptr) {
      options_.metrics->CountFailure(
          TaskName(task).substr(0, TaskName(task).find(':')));
    }
    if (task.job() == JOB_PS) {
      suspect_ps_.try_emplace(task.index(), now);
    } else if (task.job() == JOB_WORKER && sync &&
               options_.continue_without_dead_workers) {
      PSTRAIN_RETURN_IF_ERROR(DropWorker(task.index()));
    }
  }
  for (int task : state_->TakeRestartedPs()) suspect_ps_.try_emplace(task, now);
  // Silence, or a new incarnation in a Register (which anyone could send),
  // is no proof that a shard is gone: the ps itself, asked at its TF_CONFIG
  // address, says whether it still holds it. Only a lost shard is restored.
  std::string why;
  for (auto it = suspect_ps_.begin(); it != suspect_ps_.end() && why.empty();) {
    const std::string name = TaskName(MakeTask(JOB_PS, it->first));
    std::string lost;
    switch (ProbePs(it->first, &lost)) {
      case PsShard::kLost:
        why = absl::StrCat(name, " lost its shard (", lost, ")");
        break;
      case PsShard::kIntact:
        LogInfo(absl::StrCat("chief: ", name,
                             " answers and still holds its shard: nothing "
                             "to restore"));
        state_->HeardFrom(MakeTask(JOB_PS, it->first));
        it = suspect_ps_.erase(it);
        break;
      case PsShard::kUnreachable:
        if (now - it->second > options_.wait_for_tasks) {
          return absl::DeadlineExceededError(
              absl::StrCat(name, " could not be reached for ",
                           absl::FormatDuration(options_.wait_for_tasks)));
        }
        ++it;
        break;
    }
  }
  if (!why.empty()) {
    PSTRAIN_RETURN_IF_ERROR(Recover(why));
    suspect_ps_.clear();
    return true;
  }
  for (int worker : state_->TakeReturnedWorkers()) {
    PSTRAIN_RETURN_IF_ERROR(TakeBack(worker));
  }
  return false;
}

void Driver::SuspectEveryPs(const std::string& why) {
  LogError(absl::StrCat("chief: ", why,
                        "; asking every ps task whether it still holds "
                        "its shard"));
  const absl::Time now = absl::Now();
  for (int task = 0; task < ps_->num_ps(); ++task) {
    suspect_ps_.try_emplace(task, now);
  }
}

Driver::PsShard Driver::ProbePs(int task, std::string* lost) {
  absl::StatusOr<ShardStatus> status =
      ps_->client(task)->ProbeShardStatus(absl::Seconds(2));
  if (!status.ok()) {
    if (IsPeerFailure(status.status())) return PsShard::kUnreachable;
    *lost = std::string(status.status().message());
    return PsShard::kLost;
  }
  if (status->run_id().empty()) {
    *lost = "it holds no variables: it restarted";
    return PsShard::kLost;
  }
  if (status->generation() != state_->generation()) {
    *lost = absl::StrCat("it serves generation ", status->generation(),
                         ", not ", state_->generation());
    return PsShard::kLost;
  }
  return PsShard::kIntact;
}

absl::StatusOr<int64_t> Driver::SetPsWorkers(const std::vector<int>& absent,
                                             int uncounted) {
  const UpdateConfig& update = config_->update();
  const int wanted = ReplicasToAggregate(update);
  const int present =
      update.num_workers() - static_cast<int>(absent.size()) + uncounted;
  return ps_->SetWorkers(std::max(1, std::min(wanted, present)), absent);
}

absl::Status Driver::SetPsMembership() {
  if (config_->update().mode() != UpdateConfig::SYNC || ps_ == nullptr) {
    return absl::OkStatus();
  }
  return SetPsWorkers(AbsentWorkers(state_->membership())).status();
}

absl::Status Driver::DropWorker(int dead) {
  const int workers = config_->update().num_workers();
  const Membership before = state_->membership();
  std::vector<int> absent = AbsentWorkers(before);
  absent.push_back(dead);
  const int present = workers - static_cast<int>(absent.size());
  if (present == 0) {
    LogError(absl::StrCat("chief: worker ", dead,
                          " is the last one left: waiting for it"));
    return absl::OkStatus();
  }
  // First refuse its pushes, the step still waiting for as many gradients:
  // the ps tasks say which step is stuck.
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t stuck,
                           SetPsWorkers(absent, /*uncounted=*/1));
  const Membership after = WithAbsent(before, dead, stuck, workers);
  // Published before the stuck step completes, so every worker sees it
  // before it computes the next one.
  state_->SetMembership(after);
  PSTRAIN_RETURN_IF_ERROR(SetPsWorkers(absent).status());
  const int64_t batch = config_->batch_size_per_worker();
  LogError(absl::StrCat(
      "chief: going on without worker ", dead, " from step ", stuck,
      ": the step's global batch is ", present * batch, " instead of ",
      (present + 1) * batch, ", and worker ",
      CoveringWorker(after, dead, workers),
      " trains worker ", dead, "'s share from step ", stuck + 1));
  return absl::OkStatus();
}

absl::Status Driver::TakeBack(int worker) {
  // Every present worker holds at `at`, so the membership changes between
  // two steps.
  const int64_t announced = state_->pause_at_step();
  int64_t at = state_->PauseAtNextStep();
  if (announced > 0 && announced < at) {
    at = announced;
    state_->SetPauseAtStep(at);
  }
  const absl::Time give_up = absl::Now() + options_.wait_for_tasks;
  while (state_->WaitForStep(at, absl::Now() + absl::Seconds(1)) < at) {
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the workers did not reach step ", at, " to take worker ", worker,
          " back"));
    }
  }
  const Membership membership =
      WithPresent(state_->membership(), worker, at);
  state_->SetWorkerStep(worker, at);
  state_->SetMembership(membership);
  PSTRAIN_RETURN_IF_ERROR(SetPsWorkers(AbsentWorkers(membership)).status());
  state_->SetPauseAtStep(announced);
  LogInfo(absl::StrCat("chief: worker ", worker,
                       " is back; it trains its own share again from step ",
                       at));
  return absl::OkStatus();
}

int64_t Driver::NextCheckpointStep(int64_t step) const {
  int64_t next = 0;
  const int64_t every = options_.checkpoint_every_steps;
  if (every > 0) next = (step / every + 1) * every;
  const int64_t per_epoch = state_->steps_per_epoch();
  if (options_.evaluator_task && per_epoch > 0) {
    const int64_t epoch_end = (step / per_epoch + 1) * per_epoch;
    next = next > 0 ? std::min(next, epoch_end) : epoch_end;
  }
  return next < state_->total_steps() ? next : 0;
}

absl::Status Driver::StartCollective() {
  absl::StatusOr<LoadedCheckpoint> latest = FindLatestGoodCheckpoint(
      options_.model_dir,
      [](absl::string_view line) { LogError(absl::StrCat("chief: ", line)); });
  if (absl::IsNotFound(latest.status())) {
    state_->Recovered(0, 0);
    return absl::OkStatus();
  }
  PSTRAIN_RETURN_IF_ERROR(latest.status());
  const int64_t step = latest->index.step();
  if (step > state_->total_steps()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", latest->dir, " is at step ", step,
                     ", past this run's ", state_->total_steps(), " steps"));
  }
  LogInfo(absl::StrCat("chief: resuming from ", latest->dir, " at step ", step,
                       " (every worker restores it)"));
  state_->Recovered(step, 1);
  return absl::OkStatus();
}

absl::Status Driver::SaveCheckpoint(int64_t step) {
  const int64_t per_epoch = state_->steps_per_epoch();
  absl::Status saved =
      options_.collective
          ? checkpointer_->AwaitWorkerSave(step, options_.wait_for_tasks)
                .status()
          : checkpointer_->Save(step, per_epoch > 0 ? step / per_epoch : 0)
                .status();
  if (saved.ok() && options_.metrics != nullptr) {
    options_.metrics->CountCheckpoint(step);
  }
  return saved;
}

absl::Status Driver::Run() {
  absl::Status status = Train();
  if (!status.ok()) {
    LogError(absl::StrCat("chief: run failed: ", status.message()));
    state_->SetPhase(PHASE_FAILED);
  } else {
    state_->SetPhase(PHASE_FINISHED);
    LogInfo("chief: run finished; telling every task");
  }
  if (!state_->WaitUntilToldOver(absl::Now() + options_.linger)) {
    LogInfo(absl::StrCat("chief: not every task heard that the run is over "
                         "within ", absl::FormatDuration(options_.linger),
                         "; stopping anyway"));
  }
  return status;
}

absl::Status Driver::WaitForTasks() {
  const int num_workers = config_->update().num_workers();
  const bool may_go_on = options_.continue_without_dead_workers &&
                         config_->update().mode() == UpdateConfig::SYNC;
  const absl::Time give_up = absl::Now() + options_.wait_for_tasks;
  absl::Time next_log = absl::Now() + absl::Seconds(10);
  // Since when every ps task and at least one worker are here.
  std::optional<absl::Time> enough_since;
  for (;;) {
    const std::vector<std::string> missing =
        state_->WaitForTasks(std::min(give_up, absl::Now() + absl::Seconds(1)));
    if (missing.empty()) return absl::OkStatus();
    std::vector<int> gone;
    for (int w = 0; w < num_workers; ++w) {
      if (absl::c_linear_search(missing, TaskName(MakeTask(JOB_WORKER, w)))) {
        gone.push_back(w);
      }
    }
    const absl::Time now = absl::Now();
    if (may_go_on && gone.size() == missing.size() &&
        static_cast<int>(gone.size()) < num_workers) {
      if (!enough_since.has_value()) enough_since = now;
      if (now - *enough_since >= options_.failure_timeout) {
        Membership membership = state_->membership();
        for (int w : gone) membership.add_absent()->set_index(w);
        state_->SetMembership(membership);
        for (int w : gone) {
          LogError(absl::StrCat(
              "chief: going on without worker ", w, " from the start: it ",
              "did not register within ",
              absl::FormatDuration(options_.failure_timeout),
              " of the other tasks; worker ",
              CoveringWorker(membership, w, num_workers),
              " trains its share until it comes"));
        }
        return absl::OkStatus();
      }
    } else {
      enough_since.reset();
    }
    if (now >= give_up) {
      return absl::DeadlineExceededError(absl::StrCat(
          "after ", absl::FormatDuration(options_.wait_for_tasks),
          " these tasks never registered: ", absl::StrJoin(missing, ", ")));
    }
    if (now >= next_log) {
      LogInfo(absl::StrCat("chief: waiting for ", absl::StrJoin(missing, ", ")));
      next_log = now + absl::Seconds(10);
    }
  }
}

absl::Status Driver::Train() {
  PSTRAIN_RETURN_IF_ERROR(WaitForTasks());

  state_->SetPhase(PHASE_INITIALIZING);
  if (options_.collective) {
    LogInfo(absl::StrCat("chief: run ", state_->run_id(), ": collective; ",
                         spec_->variables.size(),
                         " variables held by every worker; training"));
  } else {
    PSTRAIN_RETURN_IF_ERROR(
        ps_->CreateVariables(config_->optimizer(), config_->update()));
    LogInfo(absl::StrCat("chief: run ", state_->run_id(), ": ",
                         spec_->variables.size(), " variables created on ",
                         ps_->num_ps(), " ps tasks; training"));
  }

  PSTRAIN_RETURN_IF_ERROR(Start());
  PSTRAIN_RETURN_IF_ERROR(SetPsMembership());

  const int64_t total = state_->total_steps();
  const int64_t per_epoch = state_->steps_per_epoch();
  const int64_t start = state_->start_step();
  // Workers hold at `pause` (0: none announced) until the checkpoint of that
  // step is written. Step-based pauses are announced a whole interval ahead;
  // a time-based one at the first step no worker has started yet.
  int64_t pause = 0;
  absl::Time last_checkpoint;
  int64_t step = 0;
  int64_t next_epoch_end = 0;
  // (Re)starts the loop at the current generation's first step.
  auto start_loop = [&] {
    step = last_print_step_ = state_->start_step();
    pause = NextCheckpointStep(step);
    state_->SetPauseAtStep(pause);
    last_checkpoint = last_print_ = absl::Now();
    next_epoch_end =
        per_epoch > 0 ? std::min((step / per_epoch + 1) * per_epoch, total)
                      : total;
  };
  PSTRAIN_ASSIGN_OR_RETURN(
      run_log_,
      RunLog::Create({options_.model_dir, config_->optimizer().learning_rate(),
                      ModelSummary(*spec_),
                      per_epoch > 0 ? start / per_epoch : 0}));
  start_loop();
  state_->SetPhase(PHASE_TRAINING);
  train_start_ = absl::Now();
  for (;;) {
    PSTRAIN_ASSIGN_OR_RETURN(const bool recovered, HandleFailures());
    if (recovered) start_loop();
    if (step >= total && state_->AllWorkersFinished()) {
      // The final checkpoint, once no ps task is in doubt.
      if (!suspect_ps_.empty()) {
        absl::SleepFor(absl::Milliseconds(200));
        continue;
      }
      absl::Status saved = SaveCheckpoint(total);
      if (!IsPeerFailure(saved)) {
        PSTRAIN_RETURN_IF_ERROR(saved);
        break;
      }
      SuspectEveryPs(
          absl::StrCat("the final checkpoint failed (", saved.message(), ")"));
      continue;
    }
    const int64_t next_print =
        std::min(total, last_print_step_ + options_.print_every_steps);
    int64_t target = std::min(next_print, next_epoch_end);
    if (pause > 0) target = std::min(target, pause);
    // Short, so that failures are handled soon after they are seen.
    absl::Time deadline = absl::Now() + absl::Milliseconds(500);
    if (pause == 0 && options_.checkpoint_every > absl::ZeroDuration()) {
      deadline = std::min(deadline, last_checkpoint + options_.checkpoint_every);
    }
    step = state_->WaitForStep(target, deadline);
    if (options_.metrics != nullptr) {
      options_.metrics->SetStep(
          step, per_epoch > 0 ? std::min(step / per_epoch + 1,
                                         (total + per_epoch - 1) / per_epoch)
                              : 1);
    }
    PrintEvaluatorReports();
    if (step >= next_epoch_end && next_epoch_end <= total && per_epoch > 0) {
      PrintProgress(step, (next_epoch_end + per_epoch - 1) / per_epoch);
      next_epoch_end = next_epoch_end == total
                           ? total + 1
                           : std::min(total, next_epoch_end + per_epoch);
    } else if (step >= next_print && step > last_print_step_) {
      PrintProgress(step, /*ended_epoch=*/0);
    }
    if (pause > 0 && step >= pause && suspect_ps_.empty()) {
      // Every worker holds at `pause`: nothing changes on the ps tasks.
      state_->SetPhase(PHASE_PAUSED);
      absl::Status saved = SaveCheckpoint(pause);
      if (IsPeerFailure(saved)) {
        // Tried again once every ps task answers with its shard; restored
        // if one lost it.
        SuspectEveryPs(absl::StrCat("the checkpoint of step ", pause,
                                    " failed (", saved.message(), ")"));
        continue;
      }
      PSTRAIN_RETURN_IF_ERROR(saved);
      state_->SetPhase(PHASE_TRAINING);
      last_checkpoint = absl::Now();
      pause = NextCheckpointStep(pause);
      state_->SetPauseAtStep(pause);
    } else if (pause == 0 && options_.checkpoint_every > absl::ZeroDuration() &&
               absl::Now() - last_checkpoint >= options_.checkpoint_every) {
      pause = state_->PauseAtNextStep();
      if (pause >= total) {
        pause = 0;  // the final checkpoint comes first
        state_->SetPauseAtStep(0);
        last_checkpoint = absl::Now();
      }
    }
    // Every step done: only TrainingFinished calls are still to come.
    if (step >= total) absl::SleepFor(absl::Milliseconds(10));
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - train_start_);

  PSTRAIN_ASSIGN_OR_RETURN(Evaluation final_eval, FinalEvaluation());
  const int64_t last_epoch =
      per_epoch > 0 ? (total + per_epoch - 1) / per_epoch - 1 : 0;
  if (!run_log_->history().Get(last_epoch, "val_loss").has_value()) {
    LogRun(total, 0, Progress(), 0, final_eval);  // evaluated just now
  }
  const int num_workers = config_->update().num_workers();
  const double examples = static_cast<double>(total - start) * num_workers *
                          config_->batch_size_per_worker();
  // Late gradients of backup workers: each ps counts a late push to it, so
  // the largest count is the number of late pushes.
  int64_t dropped = 0;
  const int num_ps = ps_ != nullptr ? ps_->num_ps() : 0;
  for (int task = 0; task < num_ps; ++task) {
    PSTRAIN_ASSIGN_OR_RETURN(ShardStatus status,
                             ps_->client(task)->GetShardStatus());
    dropped = std::max(dropped, status.pushes_dropped_stale());
  }
  // The AUC of a binary cross-entropy run (null where it is undefined).
  const std::string auc =
      !final_eval.auc.has_value() ? ""
      : std::isfinite(*final_eval.auc)
          ? absl::StrFormat("  \"test_auc\": %.6f,\n", *final_eval.auc)
          : std::string("  \"test_auc\": null,\n");
  // Log loss and calibration of a binary cross-entropy run.
  const auto number = [](double x) {
    return std::isfinite(x) ? absl::StrFormat("%.6f", x) : std::string("null");
  };
  const std::string ctr =
      !final_eval.log_loss.has_value()
          ? ""
          : absl::StrFormat(
                "  \"test_logloss\": %s,\n  \"test_calibration\": %s,\n"
                "  \"test_mean_prediction\": %s,\n"
                "  \"test_positive_rate\": %s,\n",
                number(*final_eval.log_loss),
                number(final_eval.calibration.value_or(NAN)),
                number(final_eval.mean_prediction),
                number(final_eval.positive_rate));
  const std::string summary = absl::StrFormat(
      "{\n  \"test_accuracy\": %.6f,\n  \"test_loss\": %.6f,\n%s"
      "  \"global_step\": %d,\n  \"epochs\": %.3f,\n"
      "  \"images_per_sec\": %.1f,\n  \"wall_seconds\": %.3f,\n"
      "  \"mode\": \"%s\",\n  \"num_workers\": %d,\n  \"num_ps\": %d,\n"
      "  \"dropped_late_gradients\": %d,\n  \"history\": %s\n}\n",
      final_eval.accuracy, final_eval.loss, auc + ctr, total,
      per_epoch > 0 ? static_cast<double>(total) / per_epoch : 0.0,
      examples / std::max(wall, 1e-9), wall,
      config_->update().mode() == UpdateConfig::SYNC ? "sync" : "async",
      num_workers, num_ps, dropped, run_log_->history().ToJson());
  PSTRAIN_RETURN_IF_ERROR(MakeDirectories(options_.model_dir));
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileAtomically(options_.model_dir + "/summary.json", summary));
  LogInfo(absl::StrFormat(
      "chief: done: test accuracy %.4f, test loss %.4f%s, %d steps in %s; "
      "summary in %s/summary.json",
      final_eval.accuracy, final_eval.loss,
      final_eval.auc.has_value()
          ? absl::StrFormat(", test AUC %.4f", *final_eval.auc) +
                (final_eval.log_loss.has_value()
                     ? absl::StrFormat(", test log loss %.4f",
                                       *final_eval.log_loss)
                     : "")
          : "",
      total, Clock(wall), options_.model_dir));
  return absl::OkStatus();
}

void Driver::PrintProgress(int64_t step, int64_t ended_epoch) {
  const bool end_of_epoch = ended_epoch > 0;
  const Progress progress = state_->TakeProgress();
  const absl::Time now = absl::Now();
  const double seconds = std::max(1e-9, absl::ToDoubleSeconds(now - last_print_));
  const int64_t per_epoch = state_->steps_per_epoch();
  const int64_t total = state_->total_steps();
  const int64_t epochs = per_epoch > 0 ? (total + per_epoch - 1) / per_epoch : 1;
  // The epoch that just ended, or the one under way.
  const int64_t epoch =
      end_of_epoch ? ended_epoch
                   : std::min(epochs, per_epoch > 0 ? step / per_epoch + 1 : 1);
  const double rate = (step - last_print_step_) / seconds;
  std::string line = absl::StrFormat(
      "epoch %d/%d  step %d/%d  loss %.4f  acc %.4f  %.0f img/s  ETA %s", epoch,
      epochs, step, total,
      progress.examples > 0 ? progress.loss_sum / progress.examples : 0.0,
      progress.examples > 0 ? progress.correct / progress.examples : 0.0,
      progress.examples / seconds,
      Clock(rate > 0 ? (total - step) / rate : 0.0));
  if (progress.auc_examples > 0) {
    // The workers' training AUCs over their report windows, weighted.
    absl::StrAppendFormat(&line, "  auc %.4f",
                          progress.auc_sum / progress.auc_examples);
  }
  std::optional<Evaluation> evaluation;
  if (options_.metrics != nullptr && progress.examples > 0) {
    options_.metrics->SetProgress(progress.loss_sum / progress.examples,
                                  progress.correct / progress.examples,
                                  progress.examples / seconds);
  }
  if (end_of_epoch && options_.evaluator_task) {
    absl::StrAppend(&line, "  (the evaluator evaluates the checkpoint)");
  } else if (end_of_epoch && options_.collective) {
    absl::StrAppend(&line, "  (collective: evaluated at the end)");
  } else if (end_of_epoch) {
    absl::StatusOr<Evaluation> eval = Evaluate();
    if (eval.ok()) {
      evaluation = *eval;
      absl::StrAppend(&line, "  ", FormatEvaluation(*eval));
      if (options_.metrics != nullptr) {
        options_.metrics->SetEvaluation(eval->loss, eval->accuracy);
      }
    } else {
      absl::StrAppend(&line, "  (evaluation failed: ", eval.status().message(),
                      ")");
    }
  }
  if (isatty(STDOUT_FILENO) && !end_of_epoch) {
    std::printf("\r%s", line.c_str());
  } else {
    std::printf("%s%s\n", isatty(STDOUT_FILENO) ? "\r" : "", line.c_str());
  }
  std::fflush(stdout);
  LogRun(step, ended_epoch, progress, seconds, evaluation);
  last_print_ = now;
  last_print_step_ = step;
}

void Driver::LogRun(int64_t step, int64_t ended_epoch, const Progress& progress,
                    double seconds, const std::optional<Evaluation>& eval) {
  if (run_log_ == nullptr) return;
  absl::Status status = run_log_->LogProgress(step, progress, seconds);
  if (status.ok() && ended_epoch > 0) {
    // Its last reports may still be on their way.
    status = run_log_->EndEpoch(
        ended_epoch - 1,
        state_->TakeEpochProgress(
            ended_epoch - 1, absl::Now() + std::min(absl::Seconds(5),
                                                    options_.failure_timeout)));
  }
  const int64_t per_epoch = state_->steps_per_epoch();
  const int64_t epoch = ended_epoch > 0 ? ended_epoch - 1
                        : per_epoch > 0 ? (step + per_epoch - 1) / per_epoch - 1
                                        : 0;
  if (status.ok() && eval.has_value()) {
    status = run_log_->LogEvaluation(epoch, step, *eval);
  }
  if (!status.ok()) {
    LogError(absl::StrCat("chief: writing the TensorBoard logs or ",
                          options_.model_dir,
                          "/history.csv: ", status.message()));
  }
}

void Driver::PrintEvaluatorReports() {
  const int64_t per_epoch = state_->steps_per_epoch();
  for (const RunState::EvaluationReport& report : state_->TakeEvaluations()) {
    if (options_.metrics != nullptr) {
      options_.metrics->SetEvaluation(report.loss, report.accuracy);
    }
    std::printf(
        "%sevaluator: step %ld (epoch %ld): %s\n",
        isatty(STDOUT_FILENO) ? "\r" : "", static_cast<long>(report.step),
        static_cast<long>(
            per_epoch > 0 ? (report.step + per_epoch - 1) / per_epoch : 1),
        FormatEvaluation({report.loss, report.accuracy, report.auc}).c_str());
    // An epoch's end (the evaluator may also evaluate other checkpoints).
    if (per_epoch <= 0 || report.step % per_epoch == 0 ||
        report.step == state_->total_steps()) {
      LogRun(report.step, 0, Progress(), 0,
             Evaluation{report.loss, report.accuracy, report.auc});
    }
  }
  std::fflush(stdout);
}

absl::StatusOr<Evaluation> Driver::FinalEvaluation() {
  if (options_.evaluator_task) {
    const int64_t total = state_->total_steps();
    std::optional<RunState::EvaluationReport> report = state_->WaitForEvaluation(
        total, absl::Now() + options_.evaluator_patience);
    PrintEvaluatorReports();
    if (report.has_value()) {
      return Evaluation{report->loss, report->accuracy, report->auc};
    }
    LogError(absl::StrCat("chief: the evaluator did not evaluate step ", total,
                          " within ",
                          absl::FormatDuration(options_.evaluator_patience),
                          "; evaluating it here"));
  }
  return Evaluate();
}

absl::StatusOr<Evaluation> Driver::EvaluateLatestCheckpoint() {
  PSTRAIN_ASSIGN_OR_RETURN(
      LoadedCheckpoint latest,
      FindLatestGoodCheckpoint(options_.model_dir, [](absl::string_view line) {
        LogError(absl::StrCat("chief: ", line));
      }));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<WholeVariable> variables,
      ReadVariables(latest.dir, latest.index, /*with_slots=*/false));
  std::vector<Tensor> storage;
  storage.reserve(variables.size());
  worker::Weights weights;
  for (const WholeVariable& variable : variables) {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t,
                             Tensor::Create(DT_FLOAT, variable.shape));
    if (variable.dtype != DT_FLOAT || t.num_bytes() != variable.data.size()) {
      return absl::DataLossError(absl::StrCat("evaluating ", latest.dir, ": '",
                                              variable.name,
                                              "' is not float32 of its shape"));
    }
    std::memcpy(t.raw_data(), variable.data.data(), variable.data.size());
    storage.push_back(std::move(t));
    weights[variable.name] = &storage.back();
  }
  return EvaluateOnTestSet(
      evaluator_, *test_, weights, latest.index.step(), options_.eval_batch,
      config_->loss().kind() == LossConfig::BINARY_CROSSENTROPY);
}

absl::StatusOr<Evaluation> Driver::Evaluate() {
  if (options_.collective) return EvaluateLatestCheckpoint();
  std::vector<Tensor> storage;
  storage.reserve(spec_->variables.size());
  std::map<std::string, Tensor*> pull;
  std::map<std::string, Tensor*> tables;  // Embedding tables: every row.
  worker::Weights weights;
  for (const VariableDef& def : spec_->variables) {
    const std::vector<int64_t> shape(def.shape().dims().begin(),
                                     def.shape().dims().end());
    const bool streamed = !options_.criteo_test_files.empty();
    if (def.sparse() && !shape.empty() && shape[0] == 0 && streamed) {
      continue;  // Growing: its rows are pulled batch by batch.
    }
    if (def.sparse() && (shape.empty() || shape[0] <= 0)) {
      return absl::UnimplementedError(absl::StrCat(
          "evaluating: embedding table '", def.name(),
          "' grows on first touch; only fixed-vocabulary tables are pulled"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(DT_FLOAT, shape));
    storage.push_back(std::move(t));
    (def.sparse() ? tables : pull)[def.name()] = &storage.back();
    weights[def.name()] = &storage.back();
  }
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t version, ps_->PullDense(0, pull));
  for (const auto& [name, table] : tables) {
    // In pieces of about 4 MB: a reply is one message, and gRPC refuses
    // messages over 64 MB.
    const int64_t rows = table->shape()[0];
    const int64_t width = std::max<int64_t>(1, table->row_elements());
    const int64_t per_pull =
        std::max<int64_t>(1, (int64_t{4} << 20) / (width * sizeof(float)));
    std::vector<int64_t> ids;
    for (int64_t begin = 0; begin < rows; begin += per_pull) {
      ids.clear();
      for (int64_t id = begin; id < std::min(rows, begin + per_pull); ++id) {
        ids.push_back(id);
      }
      PSTRAIN_RETURN_IF_ERROR(ps_->PeekSparse(
          name, ids, table->flat<float>().data() + begin * width));
    }
  }
  const bool binary = config_->loss().kind() == LossConfig::BINARY_CROSSENTROPY;
  if (!options_.criteo_test_files.empty()) {
    CriteoEvaluationOptions criteo;
    criteo.files = options_.criteo_test_files;
    criteo.batch = options_.eval_batch;
    criteo.bad_lines = options_.skip_bad_lines ? data::BadLines::kSkip
                                               : data::BadLines::kRefuse;
    return EvaluateOnCriteoFiles(
        evaluator_, *spec_, weights, version, criteo, binary,
        [this](const std::string& table, absl::Span<const int64_t> ids,
               float* out) { return ps_->PeekSparse(table, ids, out); });
  }
  return EvaluateOnTestSet(evaluator_, *test_, weights, version,
                           options_.eval_batch, binary);
}

}  // namespace chief
}  // namespace pstrain
