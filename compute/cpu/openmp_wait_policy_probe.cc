// For openmp_wait_policy_test: runs ReexecWithOpenMpWaitPolicy as a binary's
// main() does, then prints libgomp's own report of the settings it runs with
// (omp_display_env, to stderr) and "pid <pid>" on stdout (a re-execution
// keeps the pid; the test compares it with the one it started).
#include <omp.h>
#include <unistd.h>

#include <cstdio>

#include "compute/cpu/openmp_wait_policy.h"

int main(int argc, char** argv) {
  absl::Status status = pstrain::worker::cpu::ReexecWithOpenMpWaitPolicy(argv);
  if (!status.ok()) {
    std::fprintf(stderr, "probe: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("pid %d args %d\n", static_cast<int>(getpid()), argc);
  std::fflush(stdout);
  omp_display_env(/*verbose=*/1);
  return 0;
}
