// TF_CONFIG: the JSON cluster spec every pstrain process is configured by,
// with TensorFlow's schema, so that tools writing TF_CONFIG for TensorFlow
// (Kubeflow's TFJob, hand-written launch scripts) drive pstrain unchanged:
//
//   {"cluster": {"chief": ["host0:2222"],
//                "worker": ["host1:2222", "host2:2222"],
//                "ps": ["host3:2222"],
//                "evaluator": ["host4:2222"]},
//    "task": {"type": "worker", "index": 1},
//    "rpc_layer": "grpc",          // optional
//    "environment": "cloud"}       // optional, as TFJob writes it
//
// A job may also be TensorFlow's sparse form {"0": "h:p", "3": "h:p"}.
// "master" is accepted as the legacy name of "chief".
//
// In main():
//   absl::StatusOr<std::string> text =
//       TfConfigText(absl::GetFlag(FLAGS_tf_config), std::getenv("TF_CONFIG"));
//   absl::StatusOr<TfConfig> config = ParseTfConfig(*text);
//   if (!config.ok()) { std::cerr << config.status().message() << "\n"; return 2; }
#ifndef PSTRAIN_COMMON_TF_CONFIG_H_
#define PSTRAIN_COMMON_TF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster_spec.h"
#include "proto/rpc.pb.h"

namespace pstrain {

struct TfConfig {
  ClusterSpec cluster;
  // This process's task. An evaluator need not be listed in `cluster`.
  TaskRef task;
  // "grpc" (the only layer pstrain speaks) or "" when absent.
  std::string rpc_layer;
  // As given, e.g. "cloud"; "" when absent.
  std::string environment;
};

// Parses and checks TF_CONFIG text. Checks, as TensorFlow does: valid JSON;
// "cluster" and "task" present; known job names, "master" not beside "chief";
// no empty job; at most one chief and one evaluator; every address a valid
// host:port, none listed twice; task type in the cluster (except evaluator);
// index an integer present in its job. On failure INVALID_ARGUMENT with one
// line that starts with "TF_CONFIG: " and names the field, e.g.
//   TF_CONFIG: cluster.worker[1]: malformed address "host1": missing port ...
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json);

// The TF_CONFIG text a process uses: `flag_value` when not empty (JSON text,
// or "@path" to read it from a file), else `env_value` (the TF_CONFIG
// environment variable, may be null). INVALID_ARGUMENT when neither is given
// or the file cannot be read or holds over 16 MiB (common/read_file.h).
absl::StatusOr<std::string> TfConfigText(absl::string_view flag_value,
                                         const char* env_value);

// TfConfigText, ParseTfConfig, and a check that the task is of job
// `expected` (one binary per role), or `also` when given (the chief binary
// also runs the evaluator): INVALID_ARGUMENT such as
//   TF_CONFIG: task.type: "worker", but this is the ps binary (expected "ps")
absl::StatusOr<TfConfig> ReadTfConfig(absl::string_view flag_value,
                                      const char* env_value, JobType expected,
                                      JobType also = JOB_UNSPECIFIED);

// Where this task listens: its address in `config`'s cluster, with `port` in
// place of the cluster's port when not 0 (a binary's --port). NOT_FOUND
// naming the task when the cluster does not list it (an evaluator need not
// be).
absl::StatusOr<HostPort> ListenAddress(const TfConfig& config, int port);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TF_CONFIG_H_
