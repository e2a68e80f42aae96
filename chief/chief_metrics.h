// What the chief exposes to Prometheus (common/metrics.h): the run's global
// step and epoch, the training loss, accuracy and examples/s of the latest
// progress report, evaluation results, tasks alive (a gauge per task, read
// from the RunState at each scrape), failures detected, restores, and
// checkpoints written and the age of the latest. The Driver records them
// (DriverOptions::metrics).
#ifndef PSTRAIN_CHIEF_CHIEF_METRICS_H_
#define PSTRAIN_CHIEF_CHIEF_METRICS_H_

#include <atomic>
#include <string>

#include "chief/run_state.h"
#include "common/metrics.h"

namespace pstrain {
namespace chief {

class ChiefMetrics {
 public:
  // Adds the chief's families to `registry`; both must outlive this. At
  // each scrape, reads the tasks' liveness from `state` (may be null).
  ChiefMetrics(MetricsRegistry* registry, const RunState* state);

  void SetStep(int64_t step, int64_t epoch);
  void SetProgress(double loss, double accuracy, double examples_per_sec);
  void SetEvaluation(double loss, double accuracy);
  // A task presumed dead; `job` is "ps", "worker" or "evaluator".
  void CountFailure(const std::string& job);
  void CountRestore() { restores_->Increment(); }
  // A checkpoint written now.
  void CountCheckpoint(int64_t step);

 private:
  Gauge* const step_;
  Gauge* const epoch_;
  // Without a sample until the first report or evaluation.
  GaugeFamily* const loss_;
  GaugeFamily* const accuracy_;
  GaugeFamily* const examples_per_sec_;
  GaugeFamily* const eval_loss_;
  GaugeFamily* const eval_accuracy_;
  CounterFamily* const failures_;
  Counter* const restores_;
  Counter* const checkpoints_;
  Gauge* const checkpoint_step_;
  Gauge* const checkpoint_time_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_METRICS_H_
