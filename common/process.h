// What every pstrain binary does in main(): log lines, build information,
// malloc tuning, and waiting for a termination signal.
#ifndef PSTRAIN_COMMON_PROCESS_H_
#define PSTRAIN_COMMON_PROCESS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

// Writes "I2026-11-22 15:04:05.123 <message>" (E for errors) to stderr as
// one write, so lines from threads do not interleave.
void LogInfo(absl::string_view message);
void LogError(absl::string_view message);

// "pstrain 0.1.0 (gcc 12.2.0, optimized)", with " commit <commit>" after
// the version in a stamped build (common/version.h).
std::string BuildInfo();

// Keeps freed buffers of up to 32 MB in the heap instead of returning them to
// the kernel: on these machines each first touch of a fresh 4 KB page costs
// about 10 us, so a server that frees and reallocates its message buffers
// would measure page faults, not the network. Also keeps every thread's
// allocations in one arena (see process.cc). Call first in main(), before
// any thread starts.
void TuneMallocForLargeBuffers();

// Debian's Abseil is built with Mutex deadlock detection on, which records
// every lock acquisition in a graph; binaries turn it off (tests keep it).
void DisableMutexDeadlockDetection();

// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts
// afterwards. Call first in main(), then WaitForTerminationSignal().
void BlockTerminationSignals();

// Waits for SIGTERM or SIGINT; returns its name.
std::string WaitForTerminationSignal();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_PROCESS_H_
