#include "common/tf_config.h"

#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_util.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;

absl::Status Error(absl::string_view field, absl::string_view problem) {
  if (field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", problem));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("TF_CONFIG: ", field, ": ", problem));
}

absl::StatusOr<int> ParseIndexKey(absl::string_view field,
                                  const std::string& key) {
  int index = -1;
  if (key.empty() || !absl::ascii_isdigit(key[0]) ||
      !absl::SimpleAtoi(key, &index)) {
    return Error(field, absl::StrCat("task index \"", key,
                                     "\" is not a non-negative integer"));
  }
  return index;
}

// Reads one job: a list of addresses, or the sparse {"index": address} map.
// `seen` maps every address read so far to its field, to refuse duplicates.
absl::StatusOr<ClusterSpec::Job> ParseJob(
    const std::string& name, const Json& value,
    std::map<std::string, std::string>* seen) {
  const std::string field = "cluster." + name;
  std::vector<std::pair<int, const Json*>> entries;
  if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      entries.emplace_back(static_cast<int>(i), &value[i]);
    }
  } else if (value.is_object()) {
    for (const auto& [key, address] : value.items()) {
      PSTRAIN_ASSIGN_OR_RETURN(int index, ParseIndexKey(field, key));
      entries.emplace_back(index, &address);
    }
  } else {
    return Error(field, absl::StrCat("expected a list of \"host:port\" or a "
                                     "{\"index\": \"host:port\"} map, ",
                                     JsonGot(value)));
  }
  if (entries.empty()) return Error(field, "empty job (no tasks)");

  ClusterSpec::Job job;
  for (const auto& [index, address] : entries) {
    const std::string task_field = absl::StrCat(field, "[", index, "]");
    if (!address->is_string()) {
      return Error(task_field,
                   absl::StrCat("expected a \"host:port\" string, ", JsonGot(*address)));
    }
    absl::StatusOr<HostPort> host_port =
        ParseHostPort(address->get_ref<const std::string&>());
    if (!host_port.ok()) return Error(task_field, host_port.status().message());
    // Host names are case-insensitive.
    const std::string canonical = absl::AsciiStrToLower(host_port->ToString());
    auto [it, inserted] = seen->emplace(canonical, task_field);
    if (!inserted) {
      return Error(task_field, absl::StrCat("address \"", canonical,
                                            "\" is also ", it->second));
    }
    job.emplace(index, *std::move(host_port));
  }
  // A sparse job may leave indices out (TensorFlow runs a subset of a job
  // that way); pstrain places variables and shards data over every task of
  // a job by index, so a job must hold tasks 0..n-1.
  int expected = 0;
  for (const auto& [index, address] : job) {
    if (index != expected) {
      return Error(field,
                   absl::StrCat("task ", expected,
                                " is missing (a job's tasks must be numbered "
                                "0 to ",
                                job.size() - 1, " without gaps)"));
    }
    ++expected;
  }
  return job;
}

absl::StatusOr<ClusterSpec> ParseCluster(const Json& cluster) {
  if (!cluster.is_object()) {
    return Error("cluster", absl::StrCat("expected an object of jobs, ",
                                         JsonGot(cluster)));
  }
  if (cluster.contains("chief") && cluster.contains("master")) {
    return Error("cluster",
                 "both \"chief\" and its legacy name \"master\" are given; "
                 "keep one");
  }
  std::map<JobType, ClusterSpec::Job> jobs;
  std::map<std::string, std::string> seen;
  for (const auto& [name, value] : cluster.items()) {
    absl::StatusOr<JobType> job_type = JobFromName(name);
    if (!job_type.ok()) return Error("cluster", job_type.status().message());
    PSTRAIN_ASSIGN_OR_RETURN(ClusterSpec::Job job, ParseJob(name, value, &seen));
    if ((*job_type == JOB_CHIEF || *job_type == JOB_EVALUATOR) &&
        job.size() > 1) {
      return Error("cluster." + name,
                   absl::StrCat("at most one task allowed, found ", job.size()));
    }
    jobs.emplace(*job_type, std::move(job));
  }
  return ClusterSpec(std::move(jobs));
}

// Checks that `index` names a task of `job` in `cluster` (whose tasks are
// numbered 0..n-1: ParseJob).
absl::Status CheckIndexInJob(const ClusterSpec& cluster, JobType job,
                             int index) {
  const int tasks = cluster.NumTasks(job);
  if (index < tasks) return absl::OkStatus();
  return Error("task.index",
               absl::StrCat(index, " is out of range: job \"", JobName(job),
                            "\" has ", tasks, " task", tasks == 1 ? "" : "s",
                            " (indices 0-", tasks - 1, ")"));
}

absl::StatusOr<TaskRef> ParseTask(const Json& task, const ClusterSpec& cluster) {
  if (!task.is_object()) {
    return Error("task", absl::StrCat("expected an object {\"type\": ..., "
                                      "\"index\": ...}, ",
                                      JsonGot(task)));
  }
  if (!task.contains("type")) return Error("task.type", "missing");
  const Json& type = task["type"];
  if (!type.is_string()) {
    return Error("task.type", absl::StrCat("expected a string, ", JsonGot(type)));
  }
  absl::StatusOr<JobType> job = JobFromName(type.get_ref<const std::string&>());
  if (!job.ok()) return Error("task.type", job.status().message());

  if (!task.contains("index")) return Error("task.index", "missing");
  const Json& index = task["index"];
  if (!index.is_number_integer()) {
    return Error("task.index", absl::StrCat("expected an integer, ", JsonGot(index)));
  }
  if (index.is_number_unsigned()
          ? index.get<uint64_t>() > std::numeric_limits<int>::max()
          : index.get<int64_t>() > std::numeric_limits<int>::max()) {
    return Error("task.index", absl::StrCat(index.dump(), " is too large"));
  }
  if (!index.is_number_unsigned() && index.get<int64_t>() < 0) {
    return Error("task.index", absl::StrCat(index.dump(), " is negative"));
  }
  const int task_index = index.get<int>();

  if (cluster.NumTasks(*job) == 0) {
    // TensorFlow lets an evaluator run outside the cluster it evaluates.
    if (*job == JOB_EVALUATOR) return MakeTask(*job, task_index);
    std::vector<absl::string_view> names;
    for (const auto& [j, tasks] : cluster.jobs()) names.push_back(JobName(j));
    return Error("task.type",
                 absl::StrCat("\"", type.get_ref<const std::string&>(),
                              "\" is not a job of the cluster (jobs: ",
                              absl::StrJoin(names, ", "), ")"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckIndexInJob(cluster, *job, task_index));
  return MakeTask(*job, task_index);
}

// Reads the optional string field `name` of `root` into `out`.
absl::Status OptionalString(const Json& root, const char* name,
                            std::string* out) {
  if (!root.contains(name)) return absl::OkStatus();
  const Json& value = root[name];
  if (!value.is_string()) {
    return Error(name, absl::StrCat("expected a string, ", JsonGot(value)));
  }
  *out = value.get<std::string>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json) {
  const absl::StatusOr<Json> parsed = ParseJson(json);
  if (!parsed.ok()) {
    return Error("", absl::StrCat("invalid JSON: ", parsed.status().message()));
  }
  const Json& root = *parsed;
  if (!root.is_object()) {
    return Error("", absl::StrCat("expected a JSON object, ", JsonGot(root)));
  }
  if (!root.contains("cluster")) {
    return Error("", "missing \"cluster\" (the jobs and their addresses)");
  }
  if (!root.contains("task")) {
    return Error("", "missing \"task\" (this process's {\"type\": ..., "
                     "\"index\": ...})");
  }
  TfConfig config;
  PSTRAIN_ASSIGN_OR_RETURN(config.cluster, ParseCluster(root["cluster"]));
  PSTRAIN_ASSIGN_OR_RETURN(config.task, ParseTask(root["task"], config.cluster));
  PSTRAIN_RETURN_IF_ERROR(OptionalString(root, "rpc_layer", &config.rpc_layer));
  if (!config.rpc_layer.empty() && config.rpc_layer != "grpc") {
    return Error("rpc_layer", absl::StrCat("\"", config.rpc_layer,
                                           "\" is not supported (pstrain "
                                           "speaks \"grpc\")"));
  }
  PSTRAIN_RETURN_IF_ERROR(
      OptionalString(root, "environment", &config.environment));
  return config;
}

absl::StatusOr<std::string> TfConfigText(absl::string_view flag_value,
                                         const char* env_value) {
  if (flag_value.empty()) {
    if (env_value == nullptr || *env_value == '\0') {
      return Error("", "not set (set the TF_CONFIG environment variable or "
                       "pass --tf_config)");
    }
    return std::string(env_value);
  }
  if (!absl::StartsWith(flag_value, "@")) return std::string(flag_value);
  absl::StatusOr<std::string> text =
      ReadFileAtMost(std::string(flag_value.substr(1)), kMaxConfigFileBytes);
  if (!text.ok()) return Error("", text.status().message());
  return text;
}

absl::StatusOr<TfConfig> ReadTfConfig(absl::string_view flag_value,
                                      const char* env_value, JobType expected,
                                      JobType also) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, TfConfigText(flag_value, env_value));
  PSTRAIN_ASSIGN_OR_RETURN(TfConfig config, ParseTfConfig(text));
  const JobType job = config.task.job();
  if (job != expected && (also == JOB_UNSPECIFIED || job != also)) {
    return Error(
        "task.type",
        absl::StrCat("\"", JobName(job), "\", but this is the ",
                     JobName(expected), " binary (expected \"",
                     JobName(expected), "\"",
                     also == JOB_UNSPECIFIED
                         ? ""
                         : absl::StrCat(" or \"", JobName(also), "\""),
                     ")"));
  }
  return config;
}

absl::StatusOr<HostPort> ListenAddress(const TfConfig& config, int port) {
  PSTRAIN_ASSIGN_OR_RETURN(HostPort address,
                           config.cluster.Address(config.task));
  if (port != 0) address.port = port;
  return address;
}

}  // namespace pstrain
