// ps-lite's side of bench/ps_side_by_side.sh: bench/ps_throughput.cc's
// measurement with ps-lite (github.com/dmlc/ps-lite) as the parameter
// server. Built outside our Bazel build, against a ps-lite checkout, by
// bench/pslite/build.sh; nothing of ps-lite is part of pstrain.
//
//   bench/pslite/build.sh /path/to/ps-lite /tmp/pslite-bench
//   /tmp/pslite-bench/pslite_throughput --ps 2 --workers 2 --mb 40
//
// Without DMLC_ROLE in its environment this is the launcher: it starts
// ps-lite's scheduler, --ps servers and --workers workers (this binary
// again, with ps-lite's DMLC_* variables) on 127.0.0.1, and prints one JSON
// line in ps_throughput's form. The model is ps_throughput's: --mb / 2 MB of
// float rows of 1024 values, spread evenly over the servers' key ranges.
// Each round a worker pushes a gradient of every row (ZPush) and pulls every
// row back (ZPull), waiting for each; the server applies SGD to each push
// as our async ps does. 10 warm-up rounds, then --rounds measured; each
// worker reports its medians, and aggregate_mb_per_s is every byte moved in
// the measured rounds over the wall time they took.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/ps.h"

namespace {

constexpr int kRowWidth = 1024;
constexpr int kWarmup = 10;
constexpr float kLearningRate = 1e-3f;

struct Options {
  int ps = 2;
  int workers = 2;
  double mb = 4;
  int rounds = 100;
};

// --name value or --name=value, for the four options above.
bool ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::cerr << arg << ": missing value\n";
      return false;
    }
    if (arg == "--ps") {
      options->ps = std::atoi(value.c_str());
    } else if (arg == "--workers") {
      options->workers = std::atoi(value.c_str());
    } else if (arg == "--mb") {
      options->mb = std::atof(value.c_str());
    } else if (arg == "--rounds") {
      options->rounds = std::atoi(value.c_str());
    } else {
      std::cerr << "unknown option " << arg
                << " (known: --ps, --workers, --mb, --rounds)\n";
      return false;
    }
  }
  if (options->ps < 1 || options->workers < 1 || options->mb <= 0 ||
      options->rounds < 1) {
    std::cerr << "--ps, --workers, --rounds must be >= 1 and --mb > 0\n";
    return false;
  }
  return true;
}

int64_t NumRows(const Options& options) {
  const int64_t bytes = static_cast<int64_t>(options.mb / 2 * (1 << 20));
  return std::max<int64_t>(1, bytes / (kRowWidth * sizeof(float)));
}

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The server: rows by key, SGD on push, the rows on pull. ps-lite calls the
// handle from one thread per server.
class SgdServer {
 public:
  void Handle(const ps::KVMeta& meta, const ps::KVPairs<float>& data,
              ps::KVServer<float>* server) {
    const size_t n = data.keys.size();
    if (meta.push) {
      size_t offset = 0;
      for (size_t i = 0; i < n; ++i) {
        const int len = data.lens.empty() ? data.vals.size() / n : data.lens[i];
        std::vector<float>& w = rows_[data.keys[i]];
        if (w.empty()) w.assign(len, 0.f);
        const float* g = data.vals.data() + offset;
        for (int j = 0; j < len; ++j) w[j] -= kLearningRate * g[j];
        offset += len;
      }
      server->Response(meta);
      return;
    }
    ps::KVPairs<float> reply;
    reply.keys = data.keys;
    reply.lens.resize(n);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<float>& w = rows_[data.keys[i]];
      if (w.empty()) w.assign(kRowWidth, 0.f);
      reply.lens[i] = w.size();
      total += w.size();
    }
    reply.vals.resize(total);
    size_t offset = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::vector<float>& w = rows_[data.keys[i]];
      std::memcpy(reply.vals.data() + offset, w.data(), w.size() * sizeof(float));
      offset += w.size();
    }
    server->Response(meta, reply);
  }

 private:
  std::unordered_map<ps::Key, std::vector<float>> rows_;
};

int RunWorker(const Options& options, const std::string& result_file) {
  ps::KVWorker<float> kv(0, 0);
  const int64_t rows = NumRows(options);
  const ps::Key stride = std::numeric_limits<ps::Key>::max() / rows;
  ps::SArray<ps::Key> keys(rows);
  for (int64_t i = 0; i < rows; ++i) keys[i] = i * stride;
  ps::SArray<float> gradient(rows * kRowWidth, 0.001f);
  ps::SArray<int> lens(rows, kRowWidth);
  ps::SArray<float> pulled;
  ps::SArray<int> pulled_lens;
  const double mb = options.mb / 2;
  std::vector<double> push_mbps, pull_mbps, round_ms;
  using Clock = std::chrono::steady_clock;
  int64_t measured_start_us = 0;
  for (int round = 0; round < kWarmup + options.rounds; ++round) {
    const Clock::time_point start = Clock::now();
    if (round == kWarmup) measured_start_us = UnixMicros();
    kv.Wait(kv.ZPush(keys, gradient, lens));
    const Clock::time_point mid = Clock::now();
    kv.Wait(kv.ZPull(keys, &pulled, &pulled_lens));
    const Clock::time_point end = Clock::now();
    if (pulled.size() != gradient.size()) {
      std::cerr << "pulled " << pulled.size() << " values, pushed "
                << gradient.size() << "\n";
      return 1;
    }
    if (round < kWarmup) continue;
    const double push_s = std::chrono::duration<double>(mid - start).count();
    const double pull_s = std::chrono::duration<double>(end - mid).count();
    push_mbps.push_back(mb / push_s);
    pull_mbps.push_back(mb / pull_s);
    round_ms.push_back((push_s + pull_s) * 1e3);
  }
  std::ofstream(result_file)
      << Median(push_mbps) << " " << Median(pull_mbps) << " "
      << Median(round_ms) << " " << measured_start_us << " " << UnixMicros()
      << "\n";
  return 0;
}

int RunNode(const Options& options) {
  ps::Start(0);
  int rc = 0;
  SgdServer handler;
  ps::KVServer<float>* server = nullptr;
  if (ps::IsServer()) {
    server = new ps::KVServer<float>(0);
    server->set_request_handle(
        [&handler](const ps::KVMeta& meta, const ps::KVPairs<float>& data,
                   ps::KVServer<float>* s) { handler.Handle(meta, data, s); });
  }
  if (ps::IsWorker()) {
    const char* dir = std::getenv("PSLITE_BENCH_RESULTS");
    rc = RunWorker(options, std::string(dir ? dir : "/tmp") + "/worker." +
                                std::to_string(ps::MyRank()));
  }
  ps::Finalize(0, true);
  delete server;
  return rc;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("picking a port");
    std::exit(1);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

pid_t Spawn(char** argv, const std::string& role) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("DMLC_ROLE", role.c_str(), 1);
    execv("/proc/self/exe", argv);
    std::perror("exec");
    _exit(127);
  }
  return pid;
}

int RunLauncher(const Options& options, char** argv) {
  char dir_template[] = "/tmp/pslite_throughput.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  setenv("PSLITE_BENCH_RESULTS", dir, 1);
  setenv("DMLC_NUM_SERVER", std::to_string(options.ps).c_str(), 1);
  setenv("DMLC_NUM_WORKER", std::to_string(options.workers).c_str(), 1);
  setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
  setenv("DMLC_PS_ROOT_PORT", std::to_string(FreePort()).c_str(), 1);
  setenv("DMLC_NODE_HOST", "127.0.0.1", 1);
  std::vector<pid_t> pids = {Spawn(argv, "scheduler")};
  for (int i = 0; i < options.ps; ++i) pids.push_back(Spawn(argv, "server"));
  for (int i = 0; i < options.workers; ++i) pids.push_back(Spawn(argv, "worker"));
  int rc = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  std::string push, pull, round;
  int64_t first_start = INT64_MAX, last_end = 0;
  // ps-lite numbers its workers' ranks 0..workers-1.
  for (int w = 0; w < options.workers && rc == 0; ++w) {
    const std::string path = std::string(dir) + "/worker." + std::to_string(w);
    double a = 0, b = 0, c = 0;
    int64_t start_us = 0, end_us = 0;
    if (!(std::ifstream(path) >> a >> b >> c >> start_us >> end_us)) {
      std::cerr << "no result in " << path << "\n";
      rc = 1;
    }
    first_start = std::min(first_start, start_us);
    last_end = std::max(last_end, end_us);
    std::remove(path.c_str());
    const char* sep = w == 0 ? "" : ", ";
    char ms[32];
    std::snprintf(ms, sizeof(ms), "%.2f", c);
    push += sep + std::to_string(static_cast<int>(a));
    pull += sep + std::to_string(static_cast<int>(b));
    round += sep + std::string(ms);
  }
  rmdir(dir);
  if (rc != 0) return rc;
  std::cout << "{\"ps\": " << options.ps << ", \"workers\": " << options.workers
            << ", \"mb\": " << options.mb << ", \"rounds\": " << options.rounds
            << ", \"push_mb_per_s\": [" << push << "], \"pull_mb_per_s\": ["
            << pull << "], \"round_ms\": [" << round
            << "], \"aggregate_mb_per_s\": "
            << static_cast<int>(options.workers * options.rounds * options.mb /
                                ((last_end - first_start) * 1e-6))
            << "}" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;
  if (std::getenv("DMLC_ROLE") == nullptr) return RunLauncher(options, argv);
  return RunNode(options);
}
