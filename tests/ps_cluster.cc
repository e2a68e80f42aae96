#include "tests/ps_cluster.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/grpc_options.h"
#include "common/status_macros.h"

namespace pstrain {
namespace testing {

absl::Status PsCluster::Start(int num_ps, const std::vector<std::string>& flags) {
  for (int i = 0; i < num_ps; ++i) {
    addresses_.push_back(absl::StrCat("127.0.0.1:", PickFreePort()));
  }
  // Unique per cluster: a test may start several.
  static int clusters = 0;
  model_dir_ = TempPath(absl::StrCat("ps-cluster-", clusters++));
  flags_ = {"--model_dir=" + model_dir_};
  flags_.insert(flags_.end(), flags.begin(), flags.end());
  for (int i = 0; i < num_ps; ++i) {
    processes_.push_back(StartTask(i, absl::StrCat("ps", i)));
  }
  for (int i = 0; i < num_ps; ++i) PSTRAIN_RETURN_IF_ERROR(WaitForTask(i));
  return absl::OkStatus();
}

absl::Status PsCluster::Restart(int task) {
  processes_[task]->Stop(SIGKILL);
  processes_[task] = StartTask(task, absl::StrCat("ps", task, "-restarted"));
  return WaitForTask(task);
}

std::unique_ptr<Subprocess> PsCluster::StartTask(int task,
                                                 const std::string& log_name) {
  const std::string tf_config = absl::StrCat(
      "{\"cluster\": {\"ps\": [\"", absl::StrJoin(addresses_, "\", \""),
      "\"]}, \"task\": {\"type\": \"ps\", \"index\": ", task, "}}");
  return std::make_unique<Subprocess>(
      Subprocess::Start("ps/ps", flags_, {{"TF_CONFIG", tf_config}},
                        TempPath(log_name + ".log")));
}

absl::Status PsCluster::WaitForTask(int task) {
  auto channel = CreatePstrainChannel(addresses_[task]);
  if (!channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + absl::Seconds(30)))) {
    return absl::UnavailableError(
        absl::StrCat("ps ", task, " did not start; its log:\n",
                     ReadFile(processes_[task]->log_path())));
  }
  return absl::OkStatus();
}

std::unique_ptr<ps::PsClient> PsCluster::Client(int task,
                                                const std::string& run_id,
                                                int worker) const {
  ps::PsClientOptions options;
  options.run_id = run_id;
  options.sender.set_job(JOB_WORKER);
  options.sender.set_index(worker);
  return std::make_unique<ps::PsClient>(CreatePstrainChannel(addresses_[task]),
                                        options);
}

absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> PsCluster::Connect(
    const std::string& run_id, int worker,
    const std::vector<VariableDef>& variables, PlacementOptions options) const {
  options.num_ps = num_ps();
  PSTRAIN_ASSIGN_OR_RETURN(Placement placement,
                           ComputePlacement(variables, options));
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  for (int i = 0; i < num_ps(); ++i) clients.push_back(Client(i, run_id, worker));
  return ps::PsClusterClient::Create(std::move(clients), placement, variables);
}

VariableDef ConstantVariable(const std::string& name, std::vector<int64_t> dims,
                             float value) {
  VariableDef def;
  def.set_name(name);
  def.set_dtype(DT_FLOAT);
  for (int64_t d : dims) def.mutable_shape()->add_dims(d);
  def.mutable_initializer()->mutable_constant()->set_value(value);
  return def;
}

UpdateConfig Update(UpdateConfig::Mode mode, int workers, int replicas,
                    int max_staleness, int64_t step_timeout_ms) {
  UpdateConfig update;
  update.set_mode(mode);
  update.set_num_workers(workers);
  update.set_replicas_to_aggregate(replicas);
  update.set_max_staleness(max_staleness);
  update.set_step_timeout_ms(step_timeout_ms);
  return update;
}

OptimizerConfig Sgd(double lr) {
  OptimizerConfig optimizer;
  optimizer.mutable_sgd();
  optimizer.set_learning_rate(lr);
  return optimizer;
}

}  // namespace testing
}  // namespace pstrain
