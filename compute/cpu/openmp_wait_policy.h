// How the OpenMP threads that run oneDNN's primitives (and our own parallel
// loops, compute/cpu/parallel.h) wait for work: briefly spinning, then
// sleeping, instead of libgomp's default of spinning for about 300,000
// iterations.
//
// Why: between two primitives a waiting OpenMP thread spins on its core.
// When another process holds one of the cores, the spinning thread and the
// one that has work share a core, and a 2-thread training step of the seed
// CNN fell to about 1/10 of the 1-thread speed (issue 20). With a short spin
// a waiting thread soon sleeps and gives the core back, so 2 threads on a
// half-busy machine keep about the 1-thread speed, while back-to-back
// primitives on an idle machine still find their threads awake.
//
// libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT only when it is loaded,
// before main() (and glibc's start-up resets an environment changed earlier
// still), and has no call to change them later. So a binary calls
// ReexecWithOpenMpWaitPolicy first thing in main(): if the user chose
// neither variable, it sets GOMP_SPINCOUNT and executes the same binary
// again with the same arguments (same pid); the second run finds the
// variable set and carries on.
//
//   int main(int argc, char** argv) {
//     absl::Status status = ReexecWithOpenMpWaitPolicy(argv);
//     if (!status.ok()) LogError(...);  // Runs on, with libgomp's default.
//     ...
#ifndef PSTRAIN_COMPUTE_CPU_OPENMP_WAIT_POLICY_H_
#define PSTRAIN_COMPUTE_CPU_OPENMP_WAIT_POLICY_H_

#include "absl/status/status.h"

namespace pstrain {
namespace worker {
namespace cpu {

// The GOMP_SPINCOUNT the binaries run with: spin iterations before a
// waiting thread sleeps (each a pause instruction, tens of nanoseconds).
inline constexpr char kOpenMpSpinCount[] = "1000";

// Returns OK without doing anything if OMP_WAIT_POLICY or GOMP_SPINCOUNT is
// set (the user's choice, or our own re-execution); else sets
// GOMP_SPINCOUNT=kOpenMpSpinCount and re-executes /proc/self/exe with argv
// (null-terminated, as main's), and returns only if that fails: an error
// naming the failure, with GOMP_SPINCOUNT unset again.
absl::Status ReexecWithOpenMpWaitPolicy(char** argv);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_OPENMP_WAIT_POLICY_H_
