#include "tests/in_process_cluster.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "chief/chief_client.h"
#include "common/grpc_options.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "common/tf_config.h"
#include "compute/cpu/model_test_util.h"
#include "worker/trainer.h"

namespace pstrain {
namespace testing {

constexpr char kRunId[] = "run-1";

struct InProcessCluster::Worker {
  int index = 0;
  chief::LocalChiefConnection* connection = nullptr;
  std::unique_ptr<chief::ChiefClient> chief;
  std::unique_ptr<ps::PsClusterClient> ps;
  ConstantBackend backend;
  // KillWorker was called, RestartWorker not since.
  std::atomic<bool> killed{false};
  absl::Status status;
  std::thread thread;
};

InProcessCluster::InProcessCluster(InProcessClusterOptions options)
    : options_(std::move(options)), ps_(options_.num_ps) {
  spec_ = worker::cpu::MustParse(worker::cpu::KerasModel(
      "4", {worker::cpu::KerasLayer("Dense", R"("name": "dense", "units": 2,
                                                "activation": "softmax")")}));
  config_.set_model_name("tiny");
  config_.set_seed(7);
  config_.mutable_optimizer()->mutable_sgd();
  config_.mutable_optimizer()->set_learning_rate(0.1f);
  UpdateConfig* update = config_.mutable_update();
  update->set_mode(UpdateConfig::SYNC);
  update->set_num_workers(options_.num_workers);
  update->set_step_timeout_ms(30000);
  config_.set_batch_size_per_worker(options_.batch);
  config_.set_epochs(1);
  for (const VariableDef& v : spec_.variables) *config_.add_variables() = v;
  PlacementOptions placement;
  placement.num_ps = options_.num_ps;
  placement_ = *ComputePlacement(spec_.variables, placement);
  data_.features = *Tensor::Create(DT_FLOAT, {options_.examples, 4});
  for (float& v : data_.features.flat<float>()) v = 0.5f;
  data_.labels.assign(options_.examples, 1);
  data_.num_classes = 2;
  total_steps_ = options_.examples / (options_.num_workers * options_.batch);
}

InProcessCluster::~InProcessCluster() {
  for (int task = 0; task < options_.num_ps; ++task) StopPs(task);
}

std::string InProcessCluster::Address(int task) const {
  return absl::StrCat("127.0.0.1:", ps_[task].port);
}

absl::Status InProcessCluster::StartPs(int task, int port) {
  ps::ShardOptions shard;
  shard.ps_task = task;
  shard.checkpoint_root = options_.model_dir;
  shard.count_batches = true;
  ps_[task].shard = std::make_unique<ps::Shard>(shard);
  return ServePs(task, port);
}

absl::Status InProcessCluster::ServePs(int task, int port) {
  ps_[task].service = std::make_unique<ps::PsService>(ps_[task].shard.get(),
                                                      ps::PsServiceOptions());
  return ps_[task].service->Start(absl::StrCat("127.0.0.1:", port),
                                  &ps_[task].port);
}

void InProcessCluster::StopServing(int task) {
  Ps& ps = ps_[task];
  if (ps.service == nullptr) return;
  // As the ps binary stops: no new call, then the pulls waiting for a step
  // end. A pull let in just before the refusal may start waiting after the
  // interruption (it would wait for the step's timeout): interrupted again
  // until nothing is in flight.
  ps.service->RefuseNewCalls();
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  do {
    ps.shard->InterruptPulls("the ps task stops serving");
  } while (!ps.service->WaitUntilIdle(
               std::min(give_up, absl::Now() + absl::Milliseconds(20))) &&
           absl::Now() < give_up);
  ps.service->Stop();
  ps.service.reset();
}

void InProcessCluster::StopPs(int task) {
  StopServing(task);
  ps_[task].shard.reset();
}

absl::Status InProcessCluster::RegisterPs(int task, bool new_process) {
  RegisterRequest request;
  *request.mutable_header()->mutable_sender() = MakeTask(JOB_PS, task);
  if (new_process) ++ps_[task].incarnation;
  request.set_incarnation(ps_[task].incarnation);
  return state_.load()->Register(request).status();
}

absl::Status InProcessCluster::StartChief() {
  states_.push_back(std::make_unique<chief::RunState>(
      kRunId, config_, placement_, cluster_, total_steps_, total_steps_));
  state_ = states_.back().get();
  for (int task = 0; task < options_.num_ps; ++task) {
    PSTRAIN_RETURN_IF_ERROR(RegisterPs(task, /*new_process=*/false));
  }
  chief::CheckpointerOptions checkpoints;
  checkpoints.model_dir = options_.model_dir;
  checkpoints.run_id = kRunId;
  checkpointer_ = std::make_unique<chief::Checkpointer>(
      checkpoints, &config_, &placement_, chief_ps_.get());
  return absl::OkStatus();
}

absl::Status InProcessCluster::ConnectWorker(Worker* worker) {
  auto connection = std::make_unique<chief::LocalChiefConnection>(state_);
  worker->connection = connection.get();
  worker->chief = std::make_unique<chief::ChiefClient>(
      std::move(connection), MakeTask(JOB_WORKER, worker->index));
  PSTRAIN_ASSIGN_OR_RETURN(worker->ps,
                           ConnectPs(MakeTask(JOB_WORKER, worker->index)));
  return absl::OkStatus();
}

void InProcessCluster::StartWorker(Worker* worker) {
  worker->thread = std::thread([this, worker] { RunWorker(worker); });
}

absl::Status InProcessCluster::Start() {
  for (int task = 0; task < options_.num_ps; ++task) {
    PSTRAIN_RETURN_IF_ERROR(StartPs(task, 0));
  }
  std::vector<std::string> ps, workers;
  for (int task = 0; task < options_.num_ps; ++task) {
    ps.push_back(absl::StrCat("\"", Address(task), "\""));
  }
  for (int w = 0; w < options_.num_workers; ++w) {
    workers.push_back(absl::StrCat("\"127.0.0.1:", 1001 + w, "\""));
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      TfConfig tf, ParseTfConfig(absl::StrCat(
                       R"({"cluster": {"chief": ["127.0.0.1:1000"], "ps": [)",
                       absl::StrJoin(ps, ", "), R"(], "worker": [)",
                       absl::StrJoin(workers, ", "),
                       R"(]}, "task": {"type": "chief", "index": 0}})")));
  cluster_ = tf.cluster;
  for (int task = 0; task < options_.num_ps; ++task) ++ps_[task].incarnation;
  PSTRAIN_ASSIGN_OR_RETURN(chief_ps_, ConnectPs(MakeTask(JOB_CHIEF, 0)));
  PSTRAIN_RETURN_IF_ERROR(StartChief());
  for (int w = 0; w < options_.num_workers; ++w) {
    auto worker = std::make_unique<Worker>();
    worker->index = w;
    PSTRAIN_RETURN_IF_ERROR(ConnectWorker(worker.get()));
    workers_.push_back(std::move(worker));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ps::PsClusterClient>>
InProcessCluster::ConnectPs(const TaskRef& sender) {
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  for (int task = 0; task < options_.num_ps; ++task) {
    ps::PsClientOptions options;
    options.run_id = kRunId;
    options.sender = sender;
    // A ps back after a fault is reached again within milliseconds.
    options.retry.initial_backoff = absl::Milliseconds(2);
    options.retry.max_backoff = absl::Milliseconds(50);
    options.retry.on_retry = [this, job = sender.job(), task] {
      CountRetry(job, task);
    };
    clients.push_back(std::make_unique<ps::PsClient>(
        CreatePstrainChannel(Address(task)), options));
  }
  return ps::PsClusterClient::Create(std::move(clients), placement_,
                                     spec_.variables);
}

void InProcessCluster::RunWorker(Worker* worker) {
  RunWorkerProcess(worker);
  if (!worker->status.ok()) {
    LogInfo(absl::StrCat("worker ", worker->index,
                         " ended: ", worker->status.ToString()));
  }
}

void InProcessCluster::RunWorkerProcess(Worker* worker) {
  absl::StatusOr<RegisterResponse> run =
      worker->chief->Register(absl::Seconds(10));
  if (!run.ok()) {
    worker->status = run.status();
    return;
  }
  absl::StatusOr<RunPhase> phase = worker->chief->WaitForPhase(
      [](RunPhase p) { return p >= PHASE_TRAINING; }, absl::Milliseconds(5),
      absl::Seconds(30));
  absl::StatusOr<TrainingState> state =
      phase.ok() ? worker->chief->GetTrainingState()
                 : absl::StatusOr<TrainingState>(phase.status());
  if (!state.ok()) {
    worker->status = state.status();
    return;
  }
  worker::TrainerOptions options;
  options.worker_index = worker->index;
  options.num_workers = options_.num_workers;
  options.report_every_steps = 2;
  options.start_step = state->start_step();
  options.generation = state->generation();
  // A bound on a test gone wrong; no test waits it out.
  options.chief_patience = absl::Seconds(30);
  options.liveness_interval = absl::Milliseconds(20);
  options.pause_poll = absl::Milliseconds(2);
  options.resync_backoff.initial_backoff = absl::Milliseconds(2);
  options.resync_backoff.max_backoff = absl::Milliseconds(20);
  options.placement = placement_;
  worker::Trainer trainer(options, &config_, &spec_, &data_, &worker->backend,
                          worker->ps.get(), worker->chief.get());
  // OK once the chief said the run finished.
  worker->status = trainer.Run();
}

bool InProcessCluster::ChiefStopped() const {
  return chief_phase_ == ChiefPhase::kStopped;
}

bool InProcessCluster::ChiefRestarted() const {
  return chief_phase_ == ChiefPhase::kRestarted;
}

absl::Status InProcessCluster::Run() {
  for (auto& worker : workers_) StartWorker(worker.get());
  // The ps tasks' heartbeats, as the ps binary sends them.
  absl::Notification done;
  std::thread heartbeats([this, &done] {
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
      chief::RunState* const state = state_;
      if (state == nullptr) continue;  // the chief is down
      for (int task = 0; task < options_.num_ps; ++task) {
        HeartbeatRequest beat;
        beat.mutable_header()->set_run_id(kRunId);
        *beat.mutable_header()->mutable_sender() = MakeTask(JOB_PS, task);
        state->Heartbeat(beat).IgnoreError();
      }
    }
  });
  chief::DriverOptions driver_options;
  driver_options.model_dir = options_.model_dir;
  driver_options.wait_for_tasks = absl::Seconds(30);
  driver_options.print_every_steps = 4;
  driver_options.eval_batch = 16;
  driver_options.linger = absl::Seconds(2);
  driver_options.checkpoint_every_steps = options_.checkpoint_every_steps;
  driver_options.failure_timeout = options_.failure_timeout;
  driver_options.poll = absl::Milliseconds(20);
  driver_options.continue_without_dead_workers =
      options_.continue_without_dead_workers;
  absl::Status status;
  for (;;) {
    absl::Notification stop;
    driver_options.stop = &stop;
    {
      absl::MutexLock lock(&chief_mu_);
      chief_stop_ = &stop;
    }
    chief::Driver driver(driver_options, state_, &config_, &spec_,
                         chief_ps_.get(), &evaluator_, &data_,
                         checkpointer_.get());
    status = driver.Run();
    absl::MutexLock lock(&chief_mu_);
    chief_stop_ = nullptr;
    if (chief_phase_ != ChiefPhase::kStopping) break;
    // RestartChief starts the next one.
    chief_phase_ = ChiefPhase::kStopped;
    chief_mu_.Await(absl::Condition(this, &InProcessCluster::ChiefRestarted));
    chief_phase_ = ChiefPhase::kRunning;
  }
  for (auto& worker : workers_) worker->thread.join();
  done.Notify();
  heartbeats.join();
  return status;
}

absl::Status InProcessCluster::RestartChief() {
  {
    absl::MutexLock lock(&chief_mu_);
    if (chief_stop_ == nullptr) {
      return absl::FailedPreconditionError("no chief runs");
    }
    chief_phase_ = ChiefPhase::kStopping;
    chief_stop_->Notify();
    chief_mu_.Await(absl::Condition(this, &InProcessCluster::ChiefStopped));
  }
  state_ = nullptr;
  std::vector<int> calls;
  for (auto& worker : workers_) {
    worker->connection->Switch(nullptr);
    calls.push_back(worker->connection->calls());
  }
  // Down until each worker alive has been refused (its liveness heartbeats
  // come every 20 ms).
  for (size_t w = 0; w < workers_.size(); ++w) {
    while (!workers_[w]->killed &&
           workers_[w]->connection->calls() == calls[w]) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(StartChief());
  for (auto& worker : workers_) worker->connection->Switch(state_);
  absl::MutexLock lock(&chief_mu_);
  chief_phase_ = ChiefPhase::kRestarted;
  return absl::OkStatus();
}

void InProcessCluster::KillWorker(int worker) {
  workers_[worker]->killed = true;
  workers_[worker]->connection->FailNext(
      1 << 30, absl::InternalError("the worker process was killed"));
}

absl::Status InProcessCluster::RestartWorker(int worker) {
  Worker* w = workers_[worker].get();
  w->thread.join();
  PSTRAIN_RETURN_IF_ERROR(ConnectWorker(w));
  w->status = absl::OkStatus();
  w->killed = false;
  StartWorker(w);
  return absl::OkStatus();
}

absl::Status InProcessCluster::worker_status(int worker) const {
  return workers_[worker]->status;
}

void InProcessCluster::WaitForStep(int64_t step) {
  state_.load()->WaitForStep(step, absl::Now() + absl::Seconds(60));
}

absl::Status InProcessCluster::RestartPs(int task) {
  const int port = ps_[task].port;
  StopPs(task);
  PSTRAIN_RETURN_IF_ERROR(StartPs(task, port));
  return RegisterPs(task, /*new_process=*/true);
}

absl::Status InProcessCluster::CutOffPs(int task, JobType noticed_by) {
  const int port = ps_[task].port;
  const int64_t before = Retries(noticed_by, task);
  StopServing(task);
  bool noticed = false;
  {
    absl::MutexLock lock(&retry_mu_);
    auto retried = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(retry_mu_) {
      return retries_[{noticed_by, task}] > before;
    };
    noticed = retry_mu_.AwaitWithTimeout(absl::Condition(&retried),
                                         absl::Seconds(30));
  }
  PSTRAIN_RETURN_IF_ERROR(ServePs(task, port));
  if (!noticed) {
    return absl::DeadlineExceededError(
        absl::StrCat("no call to ps ", task, " was tried again within 30 s"));
  }
  return absl::OkStatus();
}

void InProcessCluster::CountRetry(JobType job, int task) {
  absl::MutexLock lock(&retry_mu_);
  ++retries_[{job, task}];
}

int64_t InProcessCluster::Retries(JobType job, int task) {
  absl::MutexLock lock(&retry_mu_);
  auto it = retries_.find({job, task});
  return it == retries_.end() ? 0 : it->second;
}

absl::Status InProcessCluster::ReregisterPs(int task) {
  return RegisterPs(task, /*new_process=*/true);
}

absl::StatusOr<std::map<std::string, std::vector<float>>>
InProcessCluster::Variables() {
  std::vector<Tensor> storage;
  storage.reserve(spec_.variables.size());
  std::map<std::string, Tensor*> values;
  for (const VariableDef& def : spec_.variables) {
    PSTRAIN_ASSIGN_OR_RETURN(
        Tensor t, Tensor::Create(DT_FLOAT, std::vector<int64_t>(
                                               def.shape().dims().begin(),
                                               def.shape().dims().end())));
    storage.push_back(std::move(t));
    values[def.name()] = &storage.back();
  }
  PSTRAIN_RETURN_IF_ERROR(chief_ps_->PullDense(0, values).status());
  std::map<std::string, std::vector<float>> result;
  for (const auto& [name, t] : values) {
    result[name].assign(t->flat<float>().begin(), t->flat<float>().end());
  }
  return result;
}

std::map<int64_t, int> InProcessCluster::BatchesApplied(int task) {
  return ps_[task].shard->BatchesApplied();
}

}  // namespace testing
}  // namespace pstrain
