// A whole pstrain cluster inside the test process, for tests of the chief's
// decisions (recovery, membership) that run in seconds: the chief's
// RunState, Checkpointer and Driver; `num_ps` real ps tasks (a Shard behind
// its PsService on 127.0.0.1, reached over gRPC as the binaries reach
// them); `num_workers` real Trainers, each with a ChiefClient on an
// in-process connection to the RunState and a PsClusterClient. The workers
// compute constant gradients (tests/constant_backend.h) of a Dense model on
// 4 features, so two runs that apply the same steps end with the same
// variables, whatever happened in between.
//
//   InProcessCluster cluster(options);
//   ASSERT_TRUE(cluster.Start().ok());
//   std::thread fault([&] { cluster.WaitForStep(6); cluster.RestartPs(1); });
//   ASSERT_TRUE(cluster.Run().ok());
#ifndef PSTRAIN_TESTS_IN_PROCESS_CLUSTER_H_
#define PSTRAIN_TESTS_IN_PROCESS_CLUSTER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "chief/checkpointer.h"
#include "chief/driver.h"
#include "chief/local_chief_connection.h"
#include "chief/run_state.h"
#include "common/cluster_spec.h"
#include "common/placement.h"
#include "data/dataset.h"
#include "model/keras_model.h"
#include "ps/ps_client.h"
#include "ps/ps_service.h"
#include "ps/shard.h"
#include "tests/constant_backend.h"

namespace pstrain {
namespace testing {

struct InProcessClusterOptions {
  int num_ps = 2;
  int num_workers = 2;
  int64_t batch = 4;
  // Training examples: steps = examples / (workers x batch), one epoch.
  int64_t examples = 64;
  int64_t checkpoint_every_steps = 4;
  absl::Duration failure_timeout = absl::Seconds(30);
  bool continue_without_dead_workers = false;
  // A fresh directory for the run's checkpoints.
  std::string model_dir;
};

class InProcessCluster {
 public:
  explicit InProcessCluster(InProcessClusterOptions options);
  ~InProcessCluster();

  // Starts the ps tasks and registers them with the chief.
  absl::Status Start();
  // Runs the chief's Driver and every worker until the run ends; returns
  // the Driver's status. Worker statuses: worker_status().
  absl::Status Run();

  // The running chief's state.
  chief::RunState& state() { return *state_.load(); }
  int64_t total_steps() const { return total_steps_; }
  absl::Status worker_status(int worker) const;

  // Waits until every worker has completed `step` steps (60 s at most).
  void WaitForStep(int64_t step);
  // The chief process is killed: its Driver stops where it is, telling no
  // task anything, and every call to it is UNAVAILABLE until each worker
  // not killed has had one refused. Then a new chief starts on the run's
  // checkpoints (a fresh RunState, Checkpointer and Driver, as the chief
  // binary started again), the ps tasks register with it, as their
  // heartbeats have them do when a new chief answers, and the workers'
  // calls reach it. Returns once the new chief runs.
  absl::Status RestartChief();
  // Worker `worker` dies: every later call it makes to the chief fails
  // (INTERNAL, which is no peer failure that the Trainer would wait out),
  // so its Trainer ends at its next call, whatever it pushed before
  // staying pushed.
  void KillWorker(int worker);
  // Worker `worker` is started again as a new process: it registers with
  // the chief (waiting for one that is down) and trains from where the chief
  // tells it to. REQUIRES: KillWorker(worker) before.
  absl::Status RestartWorker(int worker);
  // Ps task `task` restarts: its service stops, a new one with an empty
  // shard serves at the same port, and it registers again as a new process.
  absl::Status RestartPs(int task);
  // Ps task `task` cannot be reached (a network fault): its service stops
  // until a client of `noticed_by` (JOB_CHIEF: the chief's, JOB_WORKER: a
  // worker's) has tried a call to it again, then a new one serves the same
  // shard at the same port. Fails if none did within 30 s.
  absl::Status CutOffPs(int task, JobType noticed_by);
  // Ps task `task` registers again with a new incarnation though it keeps
  // its shard (a forged Register, or one after a partition).
  absl::Status ReregisterPs(int task);

  // Every variable's values, pulled from the ps tasks.
  absl::StatusOr<std::map<std::string, std::vector<float>>> Variables();
  // How many times each global batch was applied, per ps task.
  std::map<int64_t, int> BatchesApplied(int task);

 private:
  struct Ps {
    std::unique_ptr<ps::Shard> shard;
    std::unique_ptr<ps::PsService> service;
    int port = 0;
    uint64_t incarnation = 0;
  };
  struct Worker;

  // A new shard served at `port` (0: any).
  absl::Status StartPs(int task, int port);
  absl::Status ServePs(int task, int port);
  void StopServing(int task);
  void StopPs(int task);
  // `new_process`: a new incarnation (a restarted ps task), else the same
  // (one registering with a restarted chief).
  absl::Status RegisterPs(int task, bool new_process);
  // A chief's state, ps registrations and Checkpointer, from scratch.
  absl::Status StartChief();
  // The worker's chief and ps clients, new.
  absl::Status ConnectWorker(Worker* worker);
  void StartWorker(Worker* worker);
  bool ChiefStopped() const ABSL_SHARED_LOCKS_REQUIRED(chief_mu_);
  bool ChiefRestarted() const ABSL_SHARED_LOCKS_REQUIRED(chief_mu_);
  std::string Address(int task) const;
  absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> ConnectPs(
      const TaskRef& sender);
  // Counts a call to ps task `task` that a client of `job` tried again.
  void CountRetry(JobType job, int task) ABSL_LOCKS_EXCLUDED(retry_mu_);
  int64_t Retries(JobType job, int task) ABSL_LOCKS_EXCLUDED(retry_mu_);
  // A worker's thread: RunWorkerProcess, and a line if it failed.
  void RunWorker(Worker* worker);
  // What the worker binary does: registers, trains, waits for the end.
  void RunWorkerProcess(Worker* worker);

  const InProcessClusterOptions options_;
  TrainingConfig config_;
  worker::ModelSpec spec_;
  Placement placement_;
  data::Dataset data_;
  int64_t total_steps_ = 0;
  ConstantBackend evaluator_;
  std::vector<Ps> ps_;
  ClusterSpec cluster_;
  // Every chief's state, kept for the calls still under way to a killed
  // one; state_ is the running chief's (null while it is down).
  std::vector<std::unique_ptr<chief::RunState>> states_;
  std::atomic<chief::RunState*> state_{nullptr};
  // RestartChief and Run's loop of Drivers.
  enum class ChiefPhase { kRunning, kStopping, kStopped, kRestarted };
  absl::Mutex chief_mu_;
  ChiefPhase chief_phase_ ABSL_GUARDED_BY(chief_mu_) = ChiefPhase::kRunning;
  // The running Driver's stop (null when none runs).
  absl::Notification* chief_stop_ ABSL_GUARDED_BY(chief_mu_) = nullptr;
  // Calls to each ps task tried again, by the job of the client.
  absl::Mutex retry_mu_;
  std::map<std::pair<JobType, int>, int64_t> retries_
      ABSL_GUARDED_BY(retry_mu_);
  std::unique_ptr<ps::PsClusterClient> chief_ps_;
  std::unique_ptr<chief::Checkpointer> checkpointer_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace testing
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_IN_PROCESS_CLUSTER_H_
