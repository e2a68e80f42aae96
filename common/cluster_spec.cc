#include "common/cluster_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

absl::string_view JobName(JobType job) {
  switch (job) {
    case JOB_CHIEF:
      return "chief";
    case JOB_WORKER:
      return "worker";
    case JOB_PS:
      return "ps";
    case JOB_EVALUATOR:
      return "evaluator";
    default:
      return "unspecified";
  }
}

absl::StatusOr<JobType> JobFromName(absl::string_view name) {
  if (name == "chief" || name == "master") return JOB_CHIEF;
  if (name == "worker") return JOB_WORKER;
  if (name == "ps") return JOB_PS;
  if (name == "evaluator") return JOB_EVALUATOR;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown job \"", name,
                   "\" (expected chief, worker, ps or evaluator)"));
}

std::string TaskName(const TaskRef& task) {
  return absl::StrCat(JobName(task.job()), ":", task.index());
}

TaskRef MakeTask(JobType job, int index) {
  TaskRef task;
  task.set_job(job);
  task.set_index(index);
  return task;
}

int ClusterSpec::NumTasks(JobType job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

std::vector<int> ClusterSpec::TaskIndices(JobType job) const {
  std::vector<int> indices;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return indices;
  for (const auto& [index, address] : it->second) indices.push_back(index);
  return indices;
}

absl::StatusOr<HostPort> ClusterSpec::Address(const TaskRef& task) const {
  auto job = jobs_.find(task.job());
  if (job != jobs_.end()) {
    auto it = job->second.find(task.index());
    if (it != job->second.end()) return it->second;
  }
  return absl::NotFoundError(
      absl::StrCat("task ", TaskName(task), " is not in the cluster"));
}

std::vector<TaskRef> ClusterSpec::TrainingTasks() const {
  std::vector<TaskRef> tasks;
  for (JobType job : {JOB_CHIEF, JOB_PS, JOB_WORKER}) {
    for (int index : TaskIndices(job)) tasks.push_back(MakeTask(job, index));
  }
  return tasks;
}

std::string ClusterSpec::ToString() const {
  std::vector<std::string> parts;
  for (const TaskRef& task : TrainingTasks()) {
    parts.push_back(absl::StrCat(TaskName(task), "=", Address(task)->ToString()));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace pstrain
