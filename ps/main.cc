// The `ps` binary: one parameter-server task of a pstrain cluster.
//
//   TF_CONFIG='{"cluster": {...}, "task": {"type": "ps", "index": 0}}' ps
//
// Serves the ParameterServer service (and gRPC's health check) at its
// TF_CONFIG address. Exits 0 on SIGTERM or SIGINT once in-flight requests are
// done, 2 on a bad TF_CONFIG or flag (with one line saying what is wrong).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "chief/chief_client.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/flag_range.h"
#include "common/grpc_options.h"
#include "common/grpc_security.h"
#include "common/metrics.h"
#include "common/metrics_server.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "common/task_security.h"
#include "common/tf_config.h"
#include "grpcpp/grpcpp.h"
#include "ps/ps_metrics.h"
#include "ps/ps_service.h"
#include "ps/shard.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG JSON, or @path to a file holding it; default: the "
          "TF_CONFIG environment variable");
ABSL_FLAG(int, port, 0, "Listen on this port instead of TF_CONFIG's");
ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics at http://<host>:<port>/metrics, where "
          "<host> is this task's TF_CONFIG host (0: off)");
ABSL_FLAG(std::string, nan_policy, "",
          "reject, skip_step or abort: what to do with a gradient holding NaN "
          "or Inf; default: the run's setting (reject unless the chief says)");
ABSL_FLAG(
    int, pull_threads, 16,
    "Threads serving pulls that wait for a sync step (1 to 1024); pushes, "
    "CreateVariables, Save and Restore have threads of their own");
ABSL_FLAG(bool, local_socket, true,
          "At a loopback address, also listen on an abstract Unix socket, "
          "which clients on this host then use instead of TCP (false: they "
          "use TCP, as clients on other hosts do)");
ABSL_FLAG(std::string, model_dir, "/tmp/pstrain",
          "The run's model directory, shared with the chief (its "
          "--model_dir): this task writes and reads its part of every "
          "checkpoint there, and nowhere else");
ABSL_FLAG(std::string, count_batches, "",
          "For tests: count how many times each global batch is applied, "
          "and write \"<batch> <count>\" lines to this file when the ps "
          "stops");
ABSL_FLAG(int64_t, max_shard_bytes, 0,
          "The most bytes of variables and optimizer state this task holds; "
          "a run asking more is refused (0: this host's physical memory)");
ABSL_FLAG(absl::Duration, chief_patience, absl::Minutes(10),
          "How long to keep the shard while the chief cannot be reached (a "
          "restarted chief takes the run up again); then exit 1");
ABSL_FLAG(int, shutdown_grace_seconds, 10,
          "On SIGTERM, how long in-flight requests may take to finish");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate the ps presents, signed by --tls_ca: with "
          "--tls_key and --tls_ca, the ps serves only mutual-TLS calls (the "
          "workers', the chief's) and heartbeats to the chief over TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM certificate of the cluster CA: the ps serves only callers "
          "whose certificate this CA signed, and trusts only a chief it "
          "signed");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the cluster's shared token (a trailing newline is "
          "dropped): the ps serves only calls carrying it (gRPC's health "
          "service excepted), and sends it with its heartbeats to the chief");
ABSL_FLAG(std::string, chief_token_file, "",
          "File holding the chief's own token (the chief's "
          "--chief_token_file): only calls carrying it may create, save, "
          "restore or resize the shard. Needed with --auth_token_file "
          "unless mutual TLS names the chief");

namespace pstrain {
namespace {

// Physical memory, or 1 TiB where the system does not say.
int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page
                               : int64_t{1} << 40;
}

// The ps's numeric flags; an error names the flag and what it accepts.
absl::Status CheckPsFlags() {
  PSTRAIN_RETURN_IF_ERROR(
      FlagInRange("port", absl::GetFlag(FLAGS_port), 0, 65535));
  PSTRAIN_RETURN_IF_ERROR(FlagInRange(
      "pull_threads", absl::GetFlag(FLAGS_pull_threads), 1, kMaxThreads));
  PSTRAIN_RETURN_IF_ERROR(
      FlagAtLeast("shutdown_grace_seconds",
                  absl::GetFlag(FLAGS_shutdown_grace_seconds), 0));
  if (absl::GetFlag(FLAGS_chief_patience) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chief_patience: ",
                     absl::FormatDuration(absl::GetFlag(FLAGS_chief_patience)),
                     " must be > 0 (e.g. 10m)"));
  }
  return absl::OkStatus();
}

int Main() {
  BlockTerminationSignals();
  TuneMallocForLargeBuffers();
  DisableMutexDeadlockDetection();

  absl::StatusOr<TfConfig> config = ReadTfConfig(
      absl::GetFlag(FLAGS_tf_config), std::getenv("TF_CONFIG"), JOB_PS);
  if (!config.ok()) return FailUsage(config.status().message());
  if (absl::Status flags = CheckPsFlags(); !flags.ok()) {
    return FailUsage(flags.message());
  }
  absl::StatusOr<HostPort> address =
      ListenAddress(*config, absl::GetFlag(FLAGS_port));
  if (!address.ok()) return FailUsage(address.status().message());
  absl::StatusOr<GrpcSecurity> security = LoadTaskSecurity(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
       absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_auth_token_file),
       absl::GetFlag(FLAGS_chief_token_file)},
      JOB_PS);
  if (!security.ok()) return FailUsage(security.status().message());

  ps::ShardOptions shard_options;
  shard_options.ps_task = config->task.index();
  const std::string nan_policy = absl::GetFlag(FLAGS_nan_policy);
  if (nan_policy == "reject") {
    shard_options.nan_policy = NAN_REJECT;
  } else if (nan_policy == "skip_step") {
    shard_options.nan_policy = NAN_SKIP_STEP;
  } else if (nan_policy == "abort") {
    shard_options.nan_policy = NAN_ABORT;
  } else if (!nan_policy.empty()) {
    return FailUsage(absl::StrCat("--nan_policy: \"", nan_policy,
                                  "\" is not reject, skip_step or abort"));
  }
  const int pull_threads = absl::GetFlag(FLAGS_pull_threads);
  const int64_t max_bytes = absl::GetFlag(FLAGS_max_shard_bytes);
  if (max_bytes < 0) {
    return FailUsage(
        absl::StrCat("--max_shard_bytes: ", max_bytes, " is negative"));
  }
  shard_options.max_bytes = max_bytes > 0 ? max_bytes : PhysicalMemoryBytes();
  const std::string ledger_path = absl::GetFlag(FLAGS_count_batches);
  shard_options.count_batches = !ledger_path.empty();
  shard_options.checkpoint_root = absl::GetFlag(FLAGS_model_dir);
  if (shard_options.checkpoint_root.empty()) {
    return FailUsage("--model_dir: empty (the run's checkpoints go there)");
  }
  absl::Status writable = CheckWritableDirectory(shard_options.checkpoint_root);
  if (!writable.ok()) {
    return FailUsage(absl::StrCat("--model_dir: ", writable.message()));
  }
  shard_options.on_abort = [](const absl::Status& status) {
    LogError(absl::StrCat("aborting (nan_policy abort): ", status.message()));
    std::_Exit(3);
  };
  ps::Shard shard(shard_options);
  MetricsRegistry metrics;
  AddProcessMetrics(&metrics, "ps", "cpu");
  ps::PsMetrics ps_metrics(&metrics);
  ps_metrics.AddShardCollector(&shard);
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      ServeMetricsOnPort(address->host, absl::GetFlag(FLAGS_metrics_port),
                         &metrics, absl::StrCat("ps ", config->task.index()));
  if (!metrics_server.ok()) {
    return FailStart(metrics_server.status(),
                     absl::StrCat("ps ", config->task.index()));
  }
  ps::PsServiceOptions service_options;
  if (*metrics_server != nullptr) service_options.metrics = &ps_metrics;
  service_options.pull_threads = pull_threads;
  service_options.local_socket = absl::GetFlag(FLAGS_local_socket);
  absl::StatusOr<HostPort> chief_address =
      config->cluster.Address(MakeTask(JOB_CHIEF, 0));
  if (chief_address.ok()) service_options.chief_host = chief_address->host;
  ps::PsService service(&shard, service_options);

  int bound_port = 0;
  const absl::Status started =
      service.Start(address->ToString(), &bound_port, *security);
  if (!started.ok()) {
    return FailTask(absl::StrCat("ps ", config->task.index()),
                    started.message());
  }
  LogInfo(absl::StrCat("ps ", config->task.index(), " of ",
                       config->cluster.NumTasks(JOB_PS), " listening on ",
                       HostPort{address->host, bound_port}.ToString(), " (",
                       DescribeGrpcSecurity(*security), "); ", BuildInfo()));

  // With a chief in the cluster: register, heartbeat, and stop once the run
  // is over (TFJob users' ps pods otherwise run forever).
  std::unique_ptr<chief::ChiefClient> chief;
  absl::Notification stopping;
  std::thread heartbeat;
  std::atomic<bool> chief_lost{false};
  if (chief_address.ok()) {
    chief = std::make_unique<chief::ChiefClient>(
        CreatePstrainChannel(chief_address->ToString(), *security),
        config->task, config->cluster.ToString());
    const absl::Duration patience = absl::GetFlag(FLAGS_chief_patience);
    heartbeat = std::thread([&chief, &stopping, &chief_lost, patience,
                             index = config->task.index()] {
      bool registered = false;
      absl::Time last_answer = absl::Now();
      // Whether the chief's answer says the run is over; then stops the ps.
      auto over = [index](RunPhase phase) {
        if (phase != PHASE_FINISHED && phase != PHASE_FAILED) return false;
        LogInfo(
            absl::StrCat("ps ", index, ": the chief says the run ",
                         phase == PHASE_FINISHED ? "is finished" : "failed"));
        kill(getpid(), SIGTERM);
        return true;
      };
      // The first beat at once: a restarted ps is waited for.
      for (absl::Duration wait = absl::ZeroDuration();
           !stopping.WaitForNotificationWithTimeout(wait);
           wait = absl::Seconds(1)) {
        if (!registered) {
          absl::StatusOr<RegisterResponse> run =
              chief->Register(absl::ZeroDuration());
          if (run.ok()) {
            registered = true;
            last_answer = absl::Now();
            LogInfo(absl::StrCat("ps ", index, ": registered in run ",
                                 run->run_id()));
            // A Register retried after its first attempt timed out may be
            // answered after the run ended: the chief counts this answer as
            // telling the ps so.
            if (over(run->state().phase())) return;
          }
        } else if (absl::StatusOr<HeartbeatResponse> beat = chief->Heartbeat(0);
                   beat.ok()) {
          last_answer = absl::Now();
          if (over(beat->phase())) return;
        } else if (absl::IsNotFound(beat.status())) {
          // A restarted chief: this shard stays as it is until it says.
          LogInfo(absl::StrCat("ps ", index, ": ", beat.status().message()));
          registered = false;
        }
        if (absl::Now() - last_answer > patience) {
          LogError(absl::StrCat("ps ", index, ": no answer from the chief for ",
                                absl::FormatDuration(patience), "; stopping"));
          chief_lost = true;
          kill(getpid(), SIGTERM);
          return;
        }
      }
    });
  }

  const std::string signal = WaitForTerminationSignal();
  LogInfo(absl::StrCat("ps ", config->task.index(), ": ", signal,
                       ", finishing in-flight requests"));
  service.RefuseNewCalls();
  // Pulls waiting for a step that will not come must end before the server
  // and the service go away.
  shard.InterruptPulls("the ps is shutting down");
  if (!service.WaitUntilIdle(absl::Now() + absl::Seconds(absl::GetFlag(
                                               FLAGS_shutdown_grace_seconds)))) {
    LogError(absl::StrCat("ps ", config->task.index(),
                          ": calls still in flight after --shutdown_grace_seconds;"
                          " cancelling them"));
  }
  // Nothing in flight: shut down at once, closing the connections clients
  // keep open (gRPC would wait for those until the deadline).
  service.Stop();
  stopping.Notify();
  if (heartbeat.joinable()) heartbeat.join();
  if (!ledger_path.empty()) {
    std::string ledger;
    for (const auto& [batch, count] : shard.BatchesApplied()) {
      absl::StrAppend(&ledger, batch, " ", count, "\n");
    }
    const absl::Status written = WriteFileAtomically(ledger_path, ledger);
    if (!written.ok()) {
      LogError(absl::StrCat("--count_batches: ", written.message()));
    }
  }
  LogInfo(absl::StrCat("ps ", config->task.index(), ": stopped"));
  return chief_lost ? 1 : 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLine(
      argc, argv, "ps",
      "Runs one parameter-server task of a pstrain cluster: holds its share "
      "of the variables and applies the workers' gradients.\n\n"
      "  TF_CONFIG='{\"cluster\": {...}, \"task\": {\"type\": \"ps\", "
      "\"index\": 0}}' ps --model_dir=/tmp/run\n\n"
      "Exits 0 on SIGTERM or SIGINT, 1 when the chief stays away longer "
      "than --chief_patience, 2 on a bad flag or TF_CONFIG.");
  return pstrain::Main();
}
