// Push and pull throughput of the parameter servers, as workers see it.
//
//   bazel run --config=opt //bench:ps_throughput -- --ps 2 --workers 2 --mb 40
//
// Starts --ps ps processes and --workers worker processes (this binary again,
// in worker mode, serving the health check as the worker binary does) on
// 127.0.0.1. The run's dense variables total --mb / 2 MB,
// row-split over every ps task; each round, every worker pushes a gradient
// of all of them (--mb / 2 MB) and pulls them all back (--mb / 2 MB), in
// async mode with SGD, so the ps applies every push; or, with --sync, in
// sync mode: each round is a step, the ps sums the workers' pushes and
// applies them once, and a pull waits for that step. Prints a final JSON line
// with each worker's median push_mb_per_s, pull_mb_per_s and round_ms, and
// aggregate_mb_per_s: all bytes moved by all workers in the measured rounds
// over the wall time they took (4 ps x 4 workers: more processes than
// cores, as on a busy host).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/grpc_options.h"
#include "common/health_server.h"
#include "common/placement.h"
#include "common/process.h"
#include "ps/ps_client.h"
#include "tests/http_get.h"
#include "tests/subprocess.h"

ABSL_FLAG(int, ps, 2, "Number of ps processes");
ABSL_FLAG(int, workers, 2, "Number of worker processes");
ABSL_FLAG(double, mb, 4, "MB moved per round per worker (half pushed, half pulled)");
ABSL_FLAG(int, rounds, 100, "Measured rounds (after 10 warm-up rounds)");
ABSL_FLAG(std::string, ps_binary, "ps/ps", "Path of the ps binary");
ABSL_FLAG(int64_t, chunk_kb, 4096, "Largest tensor chunk per message, KB");
ABSL_FLAG(bool, sync, false,
          "Sync mode: each round is a step of all the workers");
ABSL_FLAG(bool, metrics, false,
          "Each ps serves Prometheus metrics (--metrics_port), scraped every "
          "second during the run, to measure what they cost");
ABSL_FLAG(bool, local_socket, true,
          "The ps's --local_socket: workers reach it over an abstract Unix "
          "socket (false: over loopback TCP, the path between hosts)");
ABSL_FLAG(int, worker_index, -1, "Internal: run as this worker");
ABSL_FLAG(std::string, addresses, "", "Internal: ps addresses, comma-separated");
ABSL_FLAG(std::string, result_file, "", "Internal: where a worker writes results");

namespace pstrain {
namespace {

constexpr char kRun[] = "bench";
constexpr int kVariables = 4;
// Unmeasured first rounds: fresh buffers page-fault (about 10 us per 4 KB
// page here) and gRPC's flow-control windows grow during the first 5 to 8.
constexpr int kWarmup = 10;

// kVariables float32 variables [rows, 1024] totalling half of --mb.
std::vector<VariableDef> Variables() {
  const int64_t bytes = absl::GetFlag(FLAGS_mb) / 2 * (1 << 20);
  const int64_t rows = std::max<int64_t>(1, bytes / kVariables / 4096);
  std::vector<VariableDef> defs;
  for (int i = 0; i < kVariables; ++i) {
    VariableDef def;
    def.set_name(absl::StrCat("layer_", i, "/kernel"));
    def.set_dtype(DT_FLOAT);
    def.mutable_shape()->add_dims(rows);
    def.mutable_shape()->add_dims(1024);
    def.mutable_initializer()->mutable_zeros();
    defs.push_back(def);
  }
  return defs;
}

absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> Connect(
    const std::vector<std::string>& addresses, int worker) {
  PlacementOptions options;
  options.num_ps = addresses.size();
  options.rules = {{".*", static_cast<int>(addresses.size())}};
  absl::StatusOr<Placement> placement = ComputePlacement(Variables(), options);
  if (!placement.ok()) return placement.status();
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  for (const std::string& address : addresses) {
    ps::PsClientOptions client_options;
    client_options.run_id = kRun;
    client_options.sender.set_job(JOB_WORKER);
    client_options.sender.set_index(worker);
    client_options.max_chunk_bytes = absl::GetFlag(FLAGS_chunk_kb) << 10;
    clients.push_back(std::make_unique<ps::PsClient>(
        CreatePstrainChannel(address), client_options));
  }
  return ps::PsClusterClient::Create(std::move(clients), *placement, Variables());
}

// Every byte every worker moved in the measured rounds (each round: --mb
// per worker) over the wall time from the first worker's first measured
// round to the last worker's end.
double AggregateMbPerS(int workers, int64_t first_start_us,
                       int64_t last_end_us) {
  const double seconds = (last_end_us - first_start_us) * 1e-6;
  return seconds > 0 ? workers * absl::GetFlag(FLAGS_rounds) *
                           absl::GetFlag(FLAGS_mb) / seconds
                     : 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunWorker() {
  TuneMallocForLargeBuffers();
  DisableMutexDeadlockDetection();
  const std::vector<std::string> addresses =
      absl::StrSplit(absl::GetFlag(FLAGS_addresses), ',');
  // As the worker binary does: a health server (its threads may take
  // socket events from the pushes and pulls; see common/health_server.h).
  int health_port = 0;
  absl::StatusOr<std::unique_ptr<HealthServer>> health =
      HealthServer::Start("127.0.0.1:0", &health_port);
  if (!health.ok()) {
    std::cerr << health.status() << "\n";
    return 1;
  }
  auto client = Connect(addresses, absl::GetFlag(FLAGS_worker_index));
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  std::vector<Tensor> tensors;
  std::map<std::string, Tensor*> map;
  for (const VariableDef& def : Variables()) {
    tensors.push_back(*Tensor::Create(
        DT_FLOAT, {def.shape().dims(0), def.shape().dims(1)}));
  }
  int i = 0;
  for (const VariableDef& def : Variables()) map[def.name()] = &tensors[i++];
  const double mb = absl::GetFlag(FLAGS_mb) / 2;
  std::vector<double> push_mbps, pull_mbps, round_ms;
  absl::Time measured_start;
  for (int round = 0; round < kWarmup + absl::GetFlag(FLAGS_rounds); ++round) {
    const absl::Time start = absl::Now();
    if (round == kWarmup) measured_start = start;
    // Sync: round r pushes to step r and pulls its result, version r + 1.
    const int64_t step = absl::GetFlag(FLAGS_sync) ? round : 0;
    absl::Status pushed = (*client)->PushDense(step, 1, map);
    const absl::Time mid = absl::Now();
    absl::StatusOr<int64_t> pulled =
        (*client)->PullDense(absl::GetFlag(FLAGS_sync) ? step + 1 : 0, map);
    const absl::Time end = absl::Now();
    if (!pushed.ok() || !pulled.ok()) {
      std::cerr << "round " << round << ": " << pushed << " " << pulled.status()
                << "\n";
      return 1;
    }
    if (round < kWarmup) continue;
    push_mbps.push_back(mb / absl::ToDoubleSeconds(mid - start));
    pull_mbps.push_back(mb / absl::ToDoubleSeconds(end - mid));
    round_ms.push_back(absl::ToDoubleMilliseconds(end - start));
  }
  std::ofstream(absl::GetFlag(FLAGS_result_file))
      << Median(push_mbps) << " " << Median(pull_mbps) << " "
      << Median(round_ms) << " " << absl::ToUnixMicros(measured_start) << " "
      << absl::ToUnixMicros(absl::Now()) << "\n";
  return 0;
}

pid_t Spawn(const std::string& path, const std::vector<std::string>& args,
            const std::string& tf_config) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!tf_config.empty()) setenv("TF_CONFIG", tf_config.c_str(), 1);
    std::vector<std::string> all = {path};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : all) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(path.c_str(), argv.data());
    std::perror(("exec " + path).c_str());
    _exit(127);
  }
  return pid;
}

int RunBench() {
  const int num_ps = absl::GetFlag(FLAGS_ps);
  const int num_workers = absl::GetFlag(FLAGS_workers);
  std::vector<std::string> addresses;
  for (int i = 0; i < num_ps; ++i) {
    addresses.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  const std::string jobs =
      absl::StrCat("{\"ps\": [\"", absl::StrJoin(addresses, "\", \""), "\"]}");
  std::vector<pid_t> ps;
  std::vector<int> metrics_ports;
  for (int i = 0; i < num_ps; ++i) {
    std::vector<std::string> args = {
        absl::StrCat("--local_socket=", absl::GetFlag(FLAGS_local_socket))};
    if (absl::GetFlag(FLAGS_metrics)) {
      metrics_ports.push_back(testing::PickFreePort());
      args.push_back(absl::StrCat("--metrics_port=", metrics_ports.back()));
    }
    ps.push_back(Spawn(
        absl::GetFlag(FLAGS_ps_binary), args,
        absl::StrCat("{\"cluster\": ", jobs,
                     ", \"task\": {\"type\": \"ps\", \"index\": ", i, "}}")));
  }
  int rc = 0;
  auto client = Connect(addresses, 0);
  for (const std::string& address : addresses) {
    if (!CreatePstrainChannel(address)->WaitForConnected(
            absl::ToChronoTime(absl::Now() + absl::Seconds(30)))) {
      std::cerr << "ps at " << address << " did not start\n";
      rc = 1;
    }
  }
  if (rc == 0 && client.ok()) {
    UpdateConfig update;
    update.set_mode(absl::GetFlag(FLAGS_sync) ? UpdateConfig::SYNC
                                              : UpdateConfig::ASYNC);
    update.set_num_workers(num_workers);
    update.set_max_staleness(-1);
    OptimizerConfig sgd;
    sgd.mutable_sgd();
    sgd.set_learning_rate(1e-3);
    absl::Status created = (*client)->CreateVariables(sgd, update);
    if (!created.ok()) {
      std::cerr << created << "\n";
      rc = 1;
    }
  }
  // As Prometheus would: every ps's /metrics every second.
  absl::Notification done;
  int scrapes = 0;
  std::thread scraper([&metrics_ports, &done, &scrapes] {
    while (!metrics_ports.empty() &&
           !done.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      for (int port : metrics_ports) {
        int code = 0;
        testing::HttpGet(port, "/metrics", &code);
        if (code == 200) ++scrapes;
      }
    }
  });
  std::vector<std::string> results;
  if (rc == 0) {
    std::vector<pid_t> workers;
    for (int w = 0; w < num_workers; ++w) {
      results.push_back(absl::StrCat("/tmp/ps_throughput.", getpid(), ".", w));
      workers.push_back(
          Spawn("/proc/self/exe",
                {absl::StrCat("--worker_index=", w),
                 absl::StrCat("--addresses=", absl::StrJoin(addresses, ",")),
                 absl::StrCat("--mb=", absl::GetFlag(FLAGS_mb)),
                 absl::StrCat("--rounds=", absl::GetFlag(FLAGS_rounds)),
                 absl::StrCat("--chunk_kb=", absl::GetFlag(FLAGS_chunk_kb)),
                 absl::GetFlag(FLAGS_sync) ? "--sync" : "--nosync",
                 absl::StrCat("--result_file=", results.back())},
                ""));
    }
    for (pid_t pid : workers) {
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
  }
  done.Notify();
  scraper.join();
  if (!metrics_ports.empty()) std::cerr << scrapes << " scrapes\n";
  // Idle connections hold a ps's shutdown until its grace period ends.
  client = absl::UnknownError("done");
  for (pid_t pid : ps) kill(pid, SIGTERM);
  for (pid_t pid : ps) waitpid(pid, nullptr, 0);
  if (rc != 0) return rc;

  std::vector<std::string> push, pull, round;
  int64_t first_start = INT64_MAX, last_end = 0;
  for (const std::string& path : results) {
    double a = 0, b = 0, c = 0;
    int64_t start_us = 0, end_us = 0;
    std::ifstream(path) >> a >> b >> c >> start_us >> end_us;
    std::remove(path.c_str());
    first_start = std::min(first_start, start_us);
    last_end = std::max(last_end, end_us);
    push.push_back(absl::StrCat(static_cast<int>(a)));
    pull.push_back(absl::StrCat(static_cast<int>(b)));
    round.push_back(absl::StrFormat("%.2f", c));
  }
  std::cout << absl::StrCat("{\"ps\": ", num_ps, ", \"workers\": ", num_workers,
                            ", \"mb\": ", absl::GetFlag(FLAGS_mb),
                            ", \"rounds\": ", absl::GetFlag(FLAGS_rounds),
                            ", \"push_mb_per_s\": [", absl::StrJoin(push, ", "),
                            "], \"pull_mb_per_s\": [",
                            absl::StrJoin(pull, ", "), "], \"round_ms\": [",
                            absl::StrJoin(round, ", "),
                            "], \"aggregate_mb_per_s\": ",
                            static_cast<int>(AggregateMbPerS(
                                num_workers, first_start, last_end)),
                            "}")
            << std::endl;
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_worker_index) >= 0) return pstrain::RunWorker();
  return pstrain::RunBench();
}
