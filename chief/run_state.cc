#include "chief/run_state.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chief/membership.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "parallel/mesh.h"

namespace pstrain {
namespace chief {
namespace {

// A worker's step, or window of steps, must lie within the run: past its end
// is a confused or hostile sender, and would overflow the chief's step
// arithmetic (the pause step is the highest step + 1; examples are steps
// times the batch). Negative steps mean "no step" (a waiting worker's
// heartbeat) and are ignored where steps are counted.
absl::Status CheckStepInRun(absl::string_view what, int64_t step,
                            int64_t total_steps) {
  if (step <= total_steps) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " ", step, " is past this run's ", total_steps, " steps"));
}

}  // namespace

namespace {

// M of the run's --mesh (the chief checked it before the run: 1 if it does
// not parse).
int ModelSize(const TrainingConfig& config) {
  absl::StatusOr<parallel::Mesh> mesh =
      parallel::ParseMesh(config.mesh(), config.update().num_workers());
  return mesh.ok() ? mesh->model : 1;
}

}  // namespace

RunState::RunState(std::string run_id, TrainingConfig config,
                   Placement placement, ClusterSpec cluster,
                   int64_t steps_per_epoch, int64_t total_steps,
                   bool collective)
    : run_id_(std::move(run_id)),
      config_(std::move(config)),
      placement_(std::move(placement)),
      cluster_(std::move(cluster)),
      steps_per_epoch_(steps_per_epoch),
      total_steps_(total_steps),
      collective_(collective),
      model_size_(ModelSize(config_)) {
  for (int index : cluster_.TaskIndices(JOB_WORKER)) {
    worker_steps_[index] = 0;
    finished_[index] = false;
  }
}

absl::Status RunState::CheckRunId(const RequestHeader& header) const {
  if (header.run_id() == run_id_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "run id '", header.run_id(), "' is not this chief's run '", run_id_, "'"));
}

absl::StatusOr<RegisterResponse> RunState::Register(
    const RegisterRequest& request) {
  const RequestHeader& header = request.header();
  if (!header.run_id().empty()) PSTRAIN_RETURN_IF_ERROR(CheckRunId(header));
  const TaskRef& task = header.sender();
  if ((task.job() != JOB_PS && task.job() != JOB_WORKER &&
       task.job() != JOB_EVALUATOR) ||
      !cluster_.Address(task).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", TaskName(task),
                     " is not a ps, worker or evaluator of this cluster"));
  }
  if (!request.cluster().empty() && request.cluster() != cluster_.ToString()) {
    return absl::InvalidArgumentError(absl::StrCat(
        TaskName(task), "'s TF_CONFIG names another cluster (", request.cluster(),
        ") than the chief's (", cluster_.ToString(), ")"));
  }
  RegisterResponse response;
  response.set_run_id(run_id_);
  *response.mutable_config() = config_;
  *response.mutable_placement() = placement_;
  for (int index : cluster_.TaskIndices(JOB_PS)) {
    response.add_ps_addresses(cluster_.Address(MakeTask(JOB_PS, index))->ToString());
  }
  absl::MutexLock lock(&mu_);
  const std::string name = TaskName(task);
  if (task.job() == JOB_WORKER && !request.allreduce_backend().empty()) {
    if (allreduce_first_.empty()) {
      allreduce_first_ = name;
      allreduce_backend_ = request.allreduce_backend();
      allreduce_dtype_ = request.allreduce_dtype();
    } else if (request.allreduce_backend() != allreduce_backend_ ||
               request.allreduce_dtype() != allreduce_dtype_) {
      const std::string refusal = absl::StrCat(
          name,
          " all-reduces with --allreduce_backend=", request.allreduce_backend(),
          " in ", request.allreduce_dtype(), ", but ", allreduce_first_,
          ", registered first, with ", allreduce_backend_, " in ",
          allreduce_dtype_,
          ": every worker of a collective run must use the same backend and "
          "dtype");
      LogError(absl::StrCat("chief: refused ", name, ": ", refusal));
      return absl::InvalidArgumentError(refusal);
    }
  }
  auto [it, first] = registered_.try_emplace(name);
  if (!first && it->second.incarnation != request.incarnation()) {
    LogInfo(absl::StrCat("chief: ", name, " restarted (it registered again "
                         "as a new process)"));
    if (task.job() == JOB_PS && phase_ >= PHASE_INITIALIZING &&
        std::find(restarted_ps_.begin(), restarted_ps_.end(), task.index()) ==
            restarted_ps_.end()) {
      restarted_ps_.push_back(task.index());
    }
    if (task.job() == JOB_WORKER && phase_ >= PHASE_INITIALIZING &&
        std::find(restarted_workers_.begin(), restarted_workers_.end(),
                  task.index()) == restarted_workers_.end()) {
      restarted_workers_.push_back(task.index());
    }
    if (task.job() == JOB_WORKER && phase_ >= PHASE_INITIALIZING &&
        collective_) {
      restore_pending_.insert(task.index());
    }
  }
  if (task.job() == JOB_WORKER && IsAbsent(membership_, task.index()) &&
      std::find(returned_workers_.begin(), returned_workers_.end(),
                task.index()) == returned_workers_.end()) {
    returned_workers_.push_back(task.index());
  }
  it->second.ref = task;
  it->second.incarnation = request.incarnation();
  it->second.last_seen = absl::Now();
  it->second.dead = false;
  it->second.told_over = RunOverLocked();
  TrainingState* state = response.mutable_state();
  state->set_run_id(run_id_);
  state->set_phase(phase_);
  state->set_step(LowestWorkerStepLocked());
  state->set_steps_per_epoch(steps_per_epoch_);
  state->set_start_step(task.job() == JOB_WORKER ? worker_steps_[task.index()]
                                                 : start_step_);
  state->set_pause_at_step(pause_at_step_);
  state->set_generation(generation_);
  state->set_restore_pending(task.job() == JOB_WORKER &&
                             restore_pending_.count(task.index()) > 0);
  *state->mutable_membership() = membership_;
  *state->mutable_update() = config_.update();
  return response;
}

absl::Status RunState::SeenLocked(const RequestHeader& header) {
  const std::string name = TaskName(header.sender());
  auto it = registered_.find(name);
  if (it == registered_.end()) {
    return absl::NotFoundError(absl::StrCat(
        name, " is not registered with this chief (did the chief restart?): "
              "register again"));
  }
  if (it->second.dead) {
    LogInfo(absl::StrCat("chief: ", name, " is back"));
    it->second.dead = false;
  }
  it->second.last_seen = absl::Now();
  // Every caller replies with the phase.
  it->second.told_over = RunOverLocked();
  return absl::OkStatus();
}

bool RunState::CountsStepLocked(const RequestHeader& header) const {
  return header.sender().job() == JOB_WORKER &&
         worker_steps_.count(header.sender().index()) > 0 &&
         header.generation() == generation_;
}

absl::StatusOr<HeartbeatResponse> RunState::Heartbeat(
    const HeartbeatRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(CheckRunId(request.header()));
  PSTRAIN_RETURN_IF_ERROR(
      CheckStepInRun("heartbeat: step", request.step(), total_steps_));
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(SeenLocked(request.header()));
  if (CountsStepLocked(request.header())) {
    int64_t& steps = worker_steps_[request.header().sender().index()];
    steps = std::max(steps, request.step());
  }
  if (!request.nccl_unique_id().empty()) {
    const TaskRef& sender = request.header().sender();
    if (sender.job() != JOB_WORKER || sender.index() != 0) {
      return absl::InvalidArgumentError(
          "heartbeat: nccl_unique_id comes from worker 0 only");
    }
    if (request.nccl_unique_id().size() > kMaxNcclUniqueIdBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "heartbeat: nccl_unique_id has ", request.nccl_unique_id().size(),
          " bytes, more than ", kMaxNcclUniqueIdBytes));
    }
    // One for a generation ahead or behind the chief's is stale or early.
    if (request.nccl_generation() == generation_) {
      nccl_unique_id_ = request.nccl_unique_id();
      nccl_generation_ = generation_;
    }
  }
  HeartbeatResponse response;
  response.set_phase(phase_);
  response.set_step(LowestWorkerStepLocked());
  response.set_pause_at_step(pause_at_step_);
  response.set_generation(generation_);
  response.set_resume_step(start_step_);
  *response.mutable_membership() = membership_;
  if (nccl_generation_ == generation_) {
    response.set_nccl_unique_id(nccl_unique_id_);
  }
  return response;
}

absl::StatusOr<TrainingState> RunState::GetTrainingState(
    const GetTrainingStateRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(CheckRunId(request.header()));
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(SeenLocked(request.header()));
  const TaskRef& task = request.header().sender();
  TrainingState state;
  state.set_run_id(run_id_);
  state.set_phase(phase_);
  state.set_step(LowestWorkerStepLocked());
  state.set_epoch(steps_per_epoch_ > 0 ? state.step() / steps_per_epoch_ : 0);
  *state.mutable_update() = config_.update();
  state.set_steps_per_epoch(steps_per_epoch_);
  state.set_start_step(task.job() == JOB_WORKER &&
                               worker_steps_.count(task.index()) > 0
                           ? worker_steps_[task.index()]
                           : start_step_);
  state.set_pause_at_step(pause_at_step_);
  state.set_generation(generation_);
  state.set_restore_pending(task.job() == JOB_WORKER &&
                            restore_pending_.count(task.index()) > 0);
  *state.mutable_membership() = membership_;
  return state;
}

absl::StatusOr<ReportMetricsResponse> RunState::ReportMetrics(
    const ReportMetricsRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(CheckRunId(request.header()));
  // NaN fails "> 0" too; a rate so small that the busy time is infinite
  // would make every later throughput 0.
  // The M members of a model-parallel group train the same batch: each
  // counts its M-th of it.
  const double examples = request.num_steps() *
                          static_cast<double>(config_.batch_size_per_worker()) /
                          model_size_;
  if (!(request.examples_per_sec() > 0) || request.num_steps() <= 0 ||
      !std::isfinite(examples / request.examples_per_sec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: examples_per_sec ", request.examples_per_sec(),
        " and num_steps ", request.num_steps(), " must be > 0"));
  }
  PSTRAIN_RETURN_IF_ERROR(
      CheckStepInRun("metrics: step", request.step(), total_steps_));
  PSTRAIN_RETURN_IF_ERROR(
      CheckStepInRun("metrics: num_steps", request.num_steps(), total_steps_));
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(SeenLocked(request.header()));
  ReportMetricsResponse response;
  response.set_phase(phase_);
  response.set_pause_at_step(pause_at_step_);
  if (request.evaluation()) {
    if (request.header().sender().job() != JOB_EVALUATOR) {
      return absl::InvalidArgumentError(absl::StrCat(
          TaskName(request.header().sender()),
          " is not the evaluator: it cannot report an evaluation"));
    }
    if (evaluations_.count(request.step()) == 0) {
      untaken_evaluations_.push_back(request.step());
    }
    evaluations_[request.step()] = {
        request.step(), request.loss(), request.accuracy(),
        request.has_auc() ? std::optional<double>(request.auc())
                          : std::nullopt};
    return response;
  }
  if (!CountsStepLocked(request.header())) return response;
  int64_t& steps = worker_steps_[request.header().sender().index()];
  steps = std::max(steps, request.step());
  progress_.examples += examples;
  progress_.loss_sum += request.loss() * examples;
  progress_.correct += request.accuracy() * examples;
  progress_.busy_seconds += examples / request.examples_per_sec();
  if (request.has_auc() && std::isfinite(request.auc())) {
    progress_.auc_sum += request.auc() * examples;
    progress_.auc_examples += examples;
  }
  Progress& epoch =
      epoch_progress_[steps_per_epoch_ > 0
                          ? std::max<int64_t>(0, request.step() - 1) /
                                steps_per_epoch_
                          : 0];
  epoch.examples += examples;
  epoch.loss_sum += request.loss() * examples;
  epoch.correct += request.accuracy() * examples;
  epoch.busy_seconds += examples / request.examples_per_sec();
  int64_t& reported = reported_steps_[request.header().sender().index()];
  reported = std::max(reported, request.step());
  return response;
}

absl::StatusOr<TrainingFinishedResponse> RunState::TrainingFinished(
    const TrainingFinishedRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(CheckRunId(request.header()));
  PSTRAIN_RETURN_IF_ERROR(
      CheckStepInRun("finished: step", request.step(), total_steps_));
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(SeenLocked(request.header()));
  const TaskRef& task = request.header().sender();
  if (task.job() != JOB_WORKER || finished_.count(task.index()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", TaskName(task), " is not a worker of this run"));
  }
  finished_[task.index()] = true;
  worker_steps_[task.index()] =
      std::max(worker_steps_[task.index()], request.step());
  TrainingFinishedResponse response;
  response.set_phase(phase_);
  return response;
}

RunPhase RunState::phase() const {
  absl::MutexLock lock(&mu_);
  return phase_;
}

void RunState::SetPhase(RunPhase phase) {
  absl::MutexLock lock(&mu_);
  phase_ = phase;
}

std::vector<std::string> RunState::WaitForTasks(absl::Time deadline) const {
  std::vector<std::string> expected;
  for (const TaskRef& task : cluster_.TrainingTasks()) {
    if (task.job() != JOB_CHIEF) expected.push_back(TaskName(task));
  }
  auto all_here = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const std::string& name : expected) {
      if (registered_.count(name) == 0) return false;
    }
    return true;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&all_here), deadline);
  std::vector<std::string> missing;
  for (const std::string& name : expected) {
    if (registered_.count(name) == 0) missing.push_back(name);
  }
  return missing;
}

int64_t RunState::LowestWorkerStepLocked() const {
  int64_t lowest = -1;
  for (const auto& [index, step] : worker_steps_) {
    if (finished_.at(index) || IsAbsent(membership_, index)) continue;
    lowest = lowest < 0 ? step : std::min(lowest, step);
  }
  return lowest < 0 ? total_steps_ : lowest;
}

int64_t RunState::WaitForStep(int64_t step, absl::Time deadline) const {
  auto reached = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return LowestWorkerStepLocked() >= step;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&reached), deadline);
  return LowestWorkerStepLocked();
}

int64_t RunState::start_step() const {
  absl::MutexLock lock(&mu_);
  return start_step_;
}

void RunState::SetPauseAtStep(int64_t step) {
  absl::MutexLock lock(&mu_);
  pause_at_step_ = step;
}

int64_t RunState::PauseAtNextStep() {
  absl::MutexLock lock(&mu_);
  int64_t highest = start_step_;
  for (const auto& [index, steps] : worker_steps_) {
    highest = std::max(highest, steps);
  }
  pause_at_step_ = highest + 1;
  return pause_at_step_;
}

bool RunState::AllWorkersFinished() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [index, done] : finished_) {
    if (!done && !IsAbsent(membership_, index)) return false;
  }
  return true;
}

std::vector<TaskRef> RunState::FindDeadTasks(absl::Duration timeout) {
  const absl::Time now = absl::Now();
  std::vector<TaskRef> found;
  absl::MutexLock lock(&mu_);
  for (auto& [name, task] : registered_) {
    if (task.dead || now - task.last_seen < timeout) continue;
    if (task.ref.job() == JOB_WORKER && (finished_[task.ref.index()] ||
                                         IsAbsent(membership_, task.ref.index()))) {
      continue;
    }
    task.dead = true;
    found.push_back(task.ref);
  }
  return found;
}

std::map<std::string, bool> RunState::TasksAlive() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, bool> alive;
  for (const auto& [name, task] : registered_) alive[name] = !task.dead;
  return alive;
}

bool RunState::RunOverLocked() const {
  return phase_ == PHASE_FINISHED || phase_ == PHASE_FAILED;
}

bool RunState::WaitUntilToldOver(absl::Time deadline) const {
  auto all_told = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const auto& [name, task] : registered_) {
      if (!task.dead && !task.told_over) return false;
    }
    return true;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&all_told), deadline);
}

void RunState::HeardFrom(const TaskRef& task) {
  absl::MutexLock lock(&mu_);
  auto it = registered_.find(TaskName(task));
  if (it == registered_.end()) return;
  it->second.last_seen = absl::Now();
  it->second.dead = false;
}

std::vector<int> RunState::TakeRestartedPs() {
  absl::MutexLock lock(&mu_);
  return std::exchange(restarted_ps_, {});
}

std::vector<int> RunState::TakeRestartedWorkers() {
  absl::MutexLock lock(&mu_);
  return std::exchange(restarted_workers_, {});
}

std::vector<std::string> RunState::WaitForLivePs(absl::Duration timeout,
                                                 absl::Time deadline) const {
  std::vector<std::string> ps;
  for (int index : cluster_.TaskIndices(JOB_PS)) {
    ps.push_back(TaskName(MakeTask(JOB_PS, index)));
  }
  auto silent = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> names;
    const absl::Time now = absl::Now();
    for (const std::string& name : ps) {
      auto it = registered_.find(name);
      if (it == registered_.end() || it->second.dead ||
          now - it->second.last_seen >= timeout) {
        names.push_back(name);
      }
    }
    return names;
  };
  while (true) {
    std::vector<std::string> missing;
    {
      absl::MutexLock lock(&mu_);
      missing = silent();
    }
    if (missing.empty() || absl::Now() >= deadline) return missing;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

int64_t RunState::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void RunState::Recovered(int64_t step, int64_t generation) {
  absl::MutexLock lock(&mu_);
  start_step_ = step;
  for (auto& [index, steps] : worker_steps_) steps = step;
  for (auto& [index, steps] : reported_steps_) steps = std::min(steps, step);
  generation_ = generation;
  pause_at_step_ = 0;
  restarted_ps_.clear();
  restarted_workers_.clear();
  restore_pending_.clear();
  membership_ = RestartedAt(membership_, step);
}

Membership RunState::membership() const {
  absl::MutexLock lock(&mu_);
  return membership_;
}

void RunState::SetMembership(Membership membership) {
  absl::MutexLock lock(&mu_);
  membership_ = std::move(membership);
}

std::vector<int> RunState::TakeReturnedWorkers() {
  absl::MutexLock lock(&mu_);
  std::vector<int> taken;
  taken.swap(returned_workers_);
  return taken;
}

void RunState::SetWorkerStep(int worker, int64_t step) {
  absl::MutexLock lock(&mu_);
  worker_steps_[worker] = step;
  reported_steps_[worker] = step;
}

std::vector<RunState::EvaluationReport> RunState::TakeEvaluations() {
  absl::MutexLock lock(&mu_);
  std::vector<EvaluationReport> taken;
  std::sort(untaken_evaluations_.begin(), untaken_evaluations_.end());
  for (int64_t step : untaken_evaluations_) taken.push_back(evaluations_[step]);
  untaken_evaluations_.clear();
  return taken;
}

std::optional<RunState::EvaluationReport> RunState::WaitForEvaluation(
    int64_t step, absl::Time deadline) const {
  auto reported = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return evaluations_.count(step) > 0;
  };
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithDeadline(absl::Condition(&reported), deadline)) {
    return std::nullopt;
  }
  return evaluations_.at(step);
}

int64_t RunState::pause_at_step() const {
  absl::MutexLock lock(&mu_);
  return pause_at_step_;
}

Progress RunState::TakeProgress() {
  absl::MutexLock lock(&mu_);
  Progress taken = progress_;
  progress_ = Progress();
  return taken;
}

Progress RunState::TakeEpochProgress(int64_t epoch, absl::Time deadline) {
  const int64_t last_step =
      steps_per_epoch_ > 0
          ? std::min(total_steps_, (epoch + 1) * steps_per_epoch_)
          : total_steps_;
  auto reported = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const auto& [index, step] : worker_steps_) {
      if (finished_.at(index) || IsAbsent(membership_, index)) continue;
      const auto it = reported_steps_.find(index);
      if (it == reported_steps_.end() || it->second < last_step) return false;
    }
    return true;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&reported), deadline);
  Progress taken;
  const auto it = epoch_progress_.find(epoch);
  if (it != epoch_progress_.end()) taken = it->second;
  epoch_progress_.erase(epoch_progress_.begin(),
                        epoch_progress_.upper_bound(epoch));
  return taken;
}

}  // namespace chief
}  // namespace pstrain
