// Driver's failure handling (driver.h): which tasks died or restarted, the
// membership of a sync run without a dead worker (--on_worker_failure=
// continue), and the recovery of every ps, or every collective worker, from
// the newest checkpoint.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chief/driver.h"
#include "chief/membership.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "common/update_config.h"

namespace pstrain {
namespace chief {

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
    absl::SleepFor(std::min(absl::Milliseconds(100), options_.poll));
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
  // At the end (every present worker done): it has nothing left to train,
  // and joins the run's end.
  int64_t at = std::min(state_->PauseAtNextStep(), state_->total_steps());
  if (announced > 0 && announced < at) at = announced;
  state_->SetPauseAtStep(at);
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

}  // namespace chief
}  // namespace pstrain
