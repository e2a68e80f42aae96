// The CPU backend for a worker given more than one thread: two CpuBackends
// of the same model, one on all the threads and one on a single thread, and
// a ThreadCountTuner (thread_count_tuner.h) that times both as the run
// trains and steps on the faster. On an idle host that is all the threads;
// when other processes take the cores, one thread, instead of a thread team
// that waits at every parallel region for members that are not running.
//
//   CpuBackendOptions options;
//   options.num_threads = 2;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
//                            CreateAdaptiveThreadsBackend(spec, options));
//
// Both backends compute the same function of the same inputs (dropout masks
// are keyed by step and example, not by the backend); oneDNN may sum in
// another order on another thread count, so a step's results may differ in
// their last bits with the setting the tuner chose, as they do between two
// --threads settings. Each backend keeps its own buffers for the batch
// sizes it has seen: up to twice the activation memory of one. Evaluate
// runs on the setting the tuner would use next. Used by one thread at a
// time, as every Backend.
#ifndef PSTRAIN_COMPUTE_CPU_ADAPTIVE_THREADS_BACKEND_H_
#define PSTRAIN_COMPUTE_CPU_ADAPTIVE_THREADS_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compute/backend.h"
#include "compute/cpu/cpu_backend.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {

// CreateCpuBackend's errors. With options.num_threads 1 (or 0 where OpenMP
// has one thread), the plain CpuBackend: there is nothing to choose.
absl::StatusOr<std::unique_ptr<Backend>> CreateAdaptiveThreadsBackend(
    const ModelSpec& spec, const CpuBackendOptions& options);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_ADAPTIVE_THREADS_BACKEND_H_
