#include "compute/cpu/adaptive_threads_backend.h"

#include <omp.h>

#include <utility>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "compute/cpu/thread_count_tuner.h"

namespace pstrain {
namespace worker {
namespace {

class AdaptiveThreadsBackend : public Backend {
 public:
  AdaptiveThreadsBackend(std::unique_ptr<Backend> many,
                         std::unique_ptr<Backend> one)
      : many_(std::move(many)), one_(std::move(one)) {}

  absl::StatusOr<StepResult> TrainStep(const StepInput& input,
                                       const Weights& weights,
                                       Gradients* gradients) override {
    const bool many = tuner_.UseManyThreads();
    const absl::Time start = absl::Now();
    absl::StatusOr<StepResult> result =
        (many ? many_ : one_)->TrainStep(input, weights, gradients);
    if (result.ok()) tuner_.Record(many, absl::Now() - start, input.batch);
    return result;
  }

  absl::StatusOr<StepResult> Evaluate(const StepInput& input,
                                      const Weights& weights) override {
    return (tuner_.UseManyThreads() ? many_ : one_)->Evaluate(input, weights);
  }

 private:
  const std::unique_ptr<Backend> many_;
  const std::unique_ptr<Backend> one_;
  cpu::ThreadCountTuner tuner_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateAdaptiveThreadsBackend(
    const ModelSpec& spec, const CpuBackendOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> many,
                           CreateCpuBackend(spec, options));
  const int threads =
      options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  if (threads <= 1) return many;
  CpuBackendOptions one_options = options;
  one_options.num_threads = 1;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> one,
                           CreateCpuBackend(spec, one_options));
  return std::unique_ptr<Backend>(
      new AdaptiveThreadsBackend(std::move(many), std::move(one)));
}

}  // namespace worker
}  // namespace pstrain
