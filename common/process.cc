#include "common/process.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/version.h"

namespace pstrain {
namespace {

void Log(char severity, absl::string_view message) {
  const std::string line = absl::StrCat(
      std::string(1, severity),
      absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
      " ", message, "\n");
  // One write: lines from several threads stay whole.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void LogInfo(absl::string_view message) { Log('I', message); }
void LogError(absl::string_view message) { Log('E', message); }

std::string BuildInfo() {
#ifdef __OPTIMIZE__
  const char* mode = "optimized";
#else
  const char* mode = "debug";
#endif
  const absl::string_view commit = BuildCommit();
  return absl::StrCat("pstrain ", kPstrainVersion,
                      commit.empty() ? "" : " commit ", commit, " (gcc ",
                      __VERSION__, ", ", mode, ")");
}

void TuneMallocForLargeBuffers() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // One arena for all threads. gRPC reads sockets into buffers of up to
  // 4 MB (common/grpc_options.cc) on whichever of its threads polls; spread
  // over per-thread arenas, those buffers kept landing on fresh pages long
  // after warm-up, most likely because glibc unmaps an emptied extra heap of
  // a thread arena whatever M_TRIM_THRESHOLD says. In bench/ps_throughput
  // --mb 40 one arena (on the ps and on the workers: both receive) cut
  // steady-state page faults from ~4,300/s to ~200/s. Small allocations
  // still go through each thread's own cache (tcache), so the shared arena
  // is seldom contended.
  mallopt(M_ARENA_MAX, 1);
}

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string WaitForTerminationSignal() {
  sigset_t set = TerminationSignals();
  int signal = 0;
  sigwait(&set, &signal);
  return signal == SIGTERM ? "SIGTERM" : "SIGINT";
}

}  // namespace pstrain
