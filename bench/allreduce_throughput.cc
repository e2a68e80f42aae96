// Bus bandwidth of the CPU ring all-reduce (collective/) between processes,
// as nccl-tests define it: 2 * (N - 1) / N * bytes / time, the bytes each
// link carries per second. Compare with bench/gloo_allreduce.py (PyTorch's
// gloo on the same sizes and process counts); bench/allreduce_side_by_side.sh
// alternates the two.
//
//   bazel run --config=opt //bench:allreduce_throughput -- --ranks 3
//
// Without --rank it is the driver: it forks --ranks copies of itself on
// 127.0.0.1 (ports picked at run time) and waits for them; rank 0 prints one
// line per size:
//   impl=ring ranks=3 mb=4 rounds=10 median_ms=... busbw_gbps=...
// With --rank and --peers it is one participant (joining other hosts, say).
// With --verify every rank checks each round's result against the sum it
// expects and exits 1 on a mismatch (tests/allreduce_process_test.cc).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collective/ring_participant.h"
#include "common/process.h"
#include "tests/subprocess.h"

ABSL_FLAG(int, ranks, 2, "Driver: number of processes to fork, >= 1");
ABSL_FLAG(std::string, sizes_mb, "4,40", "Buffer sizes in MB, comma-separated");
ABSL_FLAG(int, rounds, 10, "Measured rounds per size (after --warmup)");
ABSL_FLAG(int, warmup, 10,
          "Unmeasured rounds per size (gRPC's flow-control windows grow "
          "during the first few)");
ABSL_FLAG(int64_t, chunk_kb, 1024, "Payload per chunk message, KB");
ABSL_FLAG(std::string, dtype, "float32", "Payload: float32 or bf16");
ABSL_FLAG(double, timeout_s, 60, "All-reduce timeout, seconds");
ABSL_FLAG(bool, verify, false, "Check every round's sum; exit 1 if wrong");
ABSL_FLAG(int, rank, -1, "Run as this participant (with --peers)");
ABSL_FLAG(std::string, peers, "", "Every participant's host:port, by rank");

namespace pstrain {
namespace {

// Small integers: their sums are exact, so every rank can check them.
float Value(int rank, int round, int64_t i) {
  return static_cast<float>((rank * 3 + round + i) % 13 - 6);
}

int Participant(int rank, const std::vector<std::string>& peers) {
  collective::RingParticipantOptions options;
  options.rank = rank;
  options.peers = peers;
  options.chunk_bytes = absl::GetFlag(FLAGS_chunk_kb) << 10;
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "bf16") {
    options.dtype = RING_DTYPE_BFLOAT16;
  } else if (dtype != "float32") {
    std::fprintf(stderr, "--dtype: %s is neither float32 nor bf16\n",
                 dtype.c_str());
    return 2;
  }
  options.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  auto participant = collective::RingParticipant::Start(options);
  if (!participant.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank,
                 participant.status().ToString().c_str());
    return 2;
  }
  const int size = static_cast<int>(peers.size());
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  uint64_t id = 0;
  for (absl::string_view mb_text :
       absl::StrSplit(absl::GetFlag(FLAGS_sizes_mb), ',')) {
    double mb;
    if (!absl::SimpleAtod(mb_text, &mb) || mb <= 0) {
      std::fprintf(stderr, "--sizes_mb: %s is not a positive number\n",
                   std::string(mb_text).c_str());
      return 2;
    }
    const int64_t n = std::max<int64_t>(1, mb * (1 << 20) / sizeof(float));
    std::vector<float> data(n);
    std::vector<double> ms;
    for (int round = 0; round < warmup + rounds; ++round) {
      if (absl::GetFlag(FLAGS_verify) || round == 0) {
        for (int64_t i = 0; i < n; ++i) data[i] = Value(rank, round, i);
      }
      const absl::Time start = absl::Now();
      absl::Status status =
          (*participant)->ring()->AllReduce(++id, absl::MakeSpan(data));
      const absl::Duration took = absl::Now() - start;
      if (!status.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
        return 1;
      }
      if (absl::GetFlag(FLAGS_verify)) {
        for (int64_t i = 0; i < n; ++i) {
          float expected = 0;
          for (int r = 0; r < size; ++r) expected += Value(r, round, i);
          // bf16 holds these small integers exactly too.
          if (data[i] != expected) {
            std::fprintf(stderr,
                         "rank %d: round %d element %ld is %g, not %g\n", rank,
                         round, static_cast<long>(i), data[i], expected);
            return 1;
          }
        }
        std::fprintf(stderr, "rank %d: round %d verified\n", rank, round);
      }
      if (round >= warmup) ms.push_back(absl::ToDoubleMilliseconds(took));
    }
    if (rank == 0 && !ms.empty()) {
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      const double bytes = static_cast<double>(n) * sizeof(float);
      const double busbw = 2.0 * (size - 1) / size * bytes / (median / 1e3);
      std::printf(
          "impl=ring ranks=%d mb=%g rounds=%d dtype=%s median_ms=%.2f "
          "busbw_gbps=%.3f\n",
          size, mb, rounds, absl::GetFlag(FLAGS_dtype).c_str(), median,
          busbw / 1e9);
      std::fflush(stdout);
    }
  }
  if (absl::GetFlag(FLAGS_verify)) {
    std::fprintf(stderr, "rank %d: every sum verified\n", rank);
  }
  (*participant)->Stop();
  return 0;
}

// Forks `ranks` participants of this binary on 127.0.0.1; 0 if all exit 0.
int Driver(int ranks, char* self) {
  std::vector<std::string> peers;
  for (int r = 0; r < ranks; ++r) {
    peers.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  const std::string peer_flag = "--peers=" + absl::StrJoin(peers, ",");
  std::vector<std::string> passed = {
      "--sizes_mb=" + absl::GetFlag(FLAGS_sizes_mb),
      absl::StrCat("--rounds=", absl::GetFlag(FLAGS_rounds)),
      absl::StrCat("--warmup=", absl::GetFlag(FLAGS_warmup)),
      absl::StrCat("--chunk_kb=", absl::GetFlag(FLAGS_chunk_kb)),
      "--dtype=" + absl::GetFlag(FLAGS_dtype),
      absl::StrCat("--timeout_s=", absl::GetFlag(FLAGS_timeout_s)),
      absl::StrCat("--verify=", absl::GetFlag(FLAGS_verify) ? "true" : "false"),
      peer_flag};
  std::vector<pid_t> children;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> args = {self, absl::StrCat("--rank=", r)};
    args.insert(args.end(), passed.begin(), passed.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      execv("/proc/self/exe", argv.data());
      std::perror("execv");
      _exit(127);
    }
    children.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::TuneMallocForLargeBuffers();
  pstrain::DisableMutexDeadlockDetection();
  absl::ParseCommandLine(argc, argv);
  const int rank = absl::GetFlag(FLAGS_rank);
  if (rank >= 0) {
    std::vector<std::string> peers =
        absl::StrSplit(absl::GetFlag(FLAGS_peers), ',', absl::SkipEmpty());
    return pstrain::Participant(rank, peers);
  }
  const int ranks = absl::GetFlag(FLAGS_ranks);
  if (ranks < 1) {
    std::fprintf(stderr, "--ranks: %d must be at least 1\n", ranks);
    return 2;
  }
  return pstrain::Driver(ranks, argv[0]);
}
