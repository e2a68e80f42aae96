// What a worker exposes to Prometheus (common/metrics.h): steps and
// examples trained, the time of each step and of its parts (waiting for
// data, pulling, computing, pushing), gradients refused as too stale, and
// resyncs after a peer failure. The Trainer records them
// (TrainerOptions::metrics).
#ifndef PSTRAIN_WORKER_WORKER_METRICS_H_
#define PSTRAIN_WORKER_WORKER_METRICS_H_

#include "common/metrics.h"

namespace pstrain {
namespace worker {

struct WorkerMetrics {
  // Adds the worker's families to `registry`, which must outlive this.
  explicit WorkerMetrics(MetricsRegistry* registry);

  Counter* steps;
  Counter* examples;
  Gauge* step;  // steps completed in the run (the next step's index)
  Histogram* step_seconds;
  // Parts of a step: pstrain_worker_step_phase_seconds{phase=...}.
  Histogram* data_seconds;
  Histogram* pull_seconds;
  Histogram* compute_seconds;
  Histogram* push_seconds;
  Counter* stale_pushes;
  Counter* resyncs;
  // Calls to a ps tried again after UNAVAILABLE (RetryOptions::on_retry).
  Counter* ps_retries;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_WORKER_METRICS_H_
