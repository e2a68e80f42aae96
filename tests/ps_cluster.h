// Real `ps` processes on 127.0.0.1 for multi-process tests, and clients for
// them.
//
//   PsCluster cluster;
//   ASSERT_TRUE(cluster.Start(2).ok());
//   auto client = cluster.Connect("run-1", /*worker=*/0, variables, options);
#ifndef PSTRAIN_TESTS_PS_CLUSTER_H_
#define PSTRAIN_TESTS_PS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/placement.h"
#include "ps/ps_client.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {

class PsCluster {
 public:
  // Starts `num_ps` ps processes (extra flags for each in `flags`) and waits
  // until each accepts connections. They share a fresh --model_dir.
  absl::Status Start(int num_ps, const std::vector<std::string>& flags = {});

  int num_ps() const { return addresses_.size(); }
  // The ps tasks' --model_dir: checkpoints are named inside it.
  const std::string& model_dir() const { return model_dir_; }
  const std::string& address(int task) const { return addresses_[task]; }
  Subprocess& process(int task) { return *processes_[task]; }
  // Kills ps task `task` (SIGKILL) and starts it again, as a new process
  // with no variables, at the same address; returns once it accepts
  // connections.
  absl::Status Restart(int task);

  // A client of ps task `task` for `run_id`, sending as worker `worker`.
  std::unique_ptr<ps::PsClient> Client(int task, const std::string& run_id,
                                       int worker) const;

  // A cluster client for `variables` placed by `options` (num_ps is set
  // here).
  absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> Connect(
      const std::string& run_id, int worker,
      const std::vector<VariableDef>& variables,
      PlacementOptions options = {}) const;

 private:
  // Starts ps task `task` with log "<log_name>.log".
  std::unique_ptr<Subprocess> StartTask(int task, const std::string& log_name);
  // Waits until ps task `task` accepts connections.
  absl::Status WaitForTask(int task);

  std::vector<std::string> addresses_;
  std::vector<std::string> flags_;
  std::vector<std::unique_ptr<Subprocess>> processes_;
  std::string model_dir_;
};

// A float32 variable of `dims` with a constant initial value.
VariableDef ConstantVariable(const std::string& name, std::vector<int64_t> dims,
                             float value);

// Sync or async SGD with learning rate `lr` for `workers` workers.
UpdateConfig Update(UpdateConfig::Mode mode, int workers, int replicas = 0,
                    int max_staleness = -1, int64_t step_timeout_ms = 30000);
OptimizerConfig Sgd(double lr);

}  // namespace testing
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_PS_CLUSTER_H_
