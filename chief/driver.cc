#include "chief/driver.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
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

int64_t Driver::NextCheckpointStep(int64_t step) const {
  int64_t next = 0;
  const int64_t every = options_.checkpoint_every_steps;
  if (every > 0) next = (step / every + 1) * every;
  const int64_t per_epoch = state_->steps_per_epoch();
  // At each epoch's end a checkpoint, for the evaluator or (collective: the
  // variables are in the workers) for the chief to evaluate.
  if ((options_.evaluator_task || options_.collective) && per_epoch > 0) {
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
    // The checkpoint of step 0: the replicas' initial values, written by
    // the chief from the run's seed (the Checkpointer's save_slices), so
    // that the run always has one to go back to, as a ps run does.
    PSTRAIN_RETURN_IF_ERROR(checkpointer_->Save(0, 0).status());
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

absl::Status Driver::CheckNotStopped() const {
  if (options_.stop == nullptr || !options_.stop->HasBeenNotified()) {
    return absl::OkStatus();
  }
  return absl::CancelledError("the chief was stopped");
}

absl::Status Driver::Run() {
  absl::Status status = Train();
  if (!CheckNotStopped().ok()) return status;
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
    PSTRAIN_RETURN_IF_ERROR(CheckNotStopped());
    absl::Time look =
        absl::Now() + std::min(absl::Seconds(1), 2 * options_.poll);
    // Under continue_without_dead_workers, the moment a missing worker is
    // presumed dead.
    if (enough_since.has_value()) {
      look = std::min(look, *enough_since + options_.failure_timeout);
    }
    const std::vector<std::string> missing =
        state_->WaitForTasks(std::min(give_up, look));
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
  // Collective runs: the epoch that ended and whose line waits for its
  // checkpoint (the chief evaluates that), else 0.
  int64_t epoch_to_print = 0;
  // (Re)starts the loop at the current generation's first step.
  auto start_loop = [&] {
    epoch_to_print = 0;
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
    PSTRAIN_RETURN_IF_ERROR(CheckNotStopped());
    PSTRAIN_ASSIGN_OR_RETURN(const bool recovered, HandleFailures());
    if (recovered) start_loop();
    if (step >= total && state_->AllWorkersFinished()) {
      // The final checkpoint, once no ps task is in doubt.
      if (!suspect_ps_.empty()) {
        absl::SleepFor(std::min(absl::Milliseconds(200), options_.poll));
        continue;
      }
      absl::Status saved = SaveCheckpoint(total);
      if (!IsPeerFailure(saved)) {
        PSTRAIN_RETURN_IF_ERROR(saved);
        if (epoch_to_print > 0) PrintProgress(total, epoch_to_print);
        // Epoch ends the workers passed since the loop last looked (a fast
        // ps run can end two at once), each with its line.
        while (!options_.collective && per_epoch > 0 &&
               next_epoch_end <= total) {
          PrintProgress(next_epoch_end,
                        (next_epoch_end + per_epoch - 1) / per_epoch);
          next_epoch_end = next_epoch_end == total
                               ? total + 1
                               : std::min(total, next_epoch_end + per_epoch);
        }
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
    absl::Time deadline = absl::Now() + options_.poll;
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
      const int64_t ended = (next_epoch_end + per_epoch - 1) / per_epoch;
      if (options_.collective) {
        epoch_to_print = ended;  // once its checkpoint is written
      } else {
        PrintProgress(step, ended);
      }
      next_epoch_end = next_epoch_end == total
                           ? total + 1
                           : std::min(total, next_epoch_end + per_epoch);
    } else if (step >= next_print && step > last_print_step_ &&
               epoch_to_print == 0) {
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
      const int64_t saved_step = pause;
      pause = NextCheckpointStep(pause);
      state_->SetPauseAtStep(pause);
      if (epoch_to_print > 0) {
        // The workers go on meanwhile: the chief evaluates the checkpoint.
        PrintProgress(saved_step, epoch_to_print);
        epoch_to_print = 0;
      }
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
  } else if (end_of_epoch) {
    absl::StatusOr<Evaluation> eval =
        options_.collective ? EvaluateCollectiveStep(step) : Evaluate();
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

}  // namespace chief
}  // namespace pstrain
