// The cluster: which tasks each job has and where they listen.
//
// Plain data, as TensorFlow's ClusterSpec: job -> (task index -> address).
// Indices need not be contiguous (TensorFlow's sparse form, where a task's
// index is a key). Built by ParseTfConfig (common/tf_config.h), which checks
// the rules; immutable and safe to share between threads afterwards.
#ifndef PSTRAIN_COMMON_CLUSTER_SPEC_H_
#define PSTRAIN_COMMON_CLUSTER_SPEC_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/host_port.h"
#include "proto/rpc.pb.h"

namespace pstrain {

// TF_CONFIG's name of `job`: "chief", "worker", "ps", "evaluator".
absl::string_view JobName(JobType job);

// The job named `name`; "master" is TensorFlow's legacy name of "chief".
// INVALID_ARGUMENT for any other name.
absl::StatusOr<JobType> JobFromName(absl::string_view name);

// "worker:1".
std::string TaskName(const TaskRef& task);

class ClusterSpec {
 public:
  // Task index -> address.
  using Job = std::map<int, HostPort>;

  ClusterSpec() = default;
  explicit ClusterSpec(std::map<JobType, Job> jobs) : jobs_(std::move(jobs)) {}

  const std::map<JobType, Job>& jobs() const { return jobs_; }

  // Number of tasks of `job` (0 when the job is absent).
  int NumTasks(JobType job) const;

  // Indices of the tasks of `job`, ascending.
  std::vector<int> TaskIndices(JobType job) const;

  // The address of `task`, or NOT_FOUND naming it.
  absl::StatusOr<HostPort> Address(const TaskRef& task) const;

  // The tasks that train together, in the order chief, ps, worker (then by
  // index): every task but the evaluator, which is not part of the training
  // cluster.
  std::vector<TaskRef> TrainingTasks() const;

  // The training tasks and their addresses, one canonical line:
  // "chief:0=h0:2222 ps:0=h1:2222 worker:0=h2:2222". Equal for equal
  // training clusters, however their TF_CONFIG was written.
  std::string ToString() const;

 private:
  std::map<JobType, Job> jobs_;
};

// A TaskRef from its parts.
TaskRef MakeTask(JobType job, int index);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CLUSTER_SPEC_H_
