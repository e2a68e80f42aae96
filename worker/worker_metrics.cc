#include "worker/worker_metrics.h"

namespace pstrain {
namespace worker {

WorkerMetrics::WorkerMetrics(MetricsRegistry* registry) {
  steps = registry
              ->AddCounter("pstrain_worker_steps_total",
                           "Steps this worker trained and pushed.")
              ->Get();
  examples = registry
                 ->AddCounter("pstrain_worker_examples_total",
                              "Examples this worker trained on.")
                 ->Get();
  step = registry
             ->AddGauge("pstrain_worker_step",
                        "Steps of the run this worker has completed.")
             ->Get();
  step_seconds =
      registry
          ->AddHistogram("pstrain_worker_step_seconds", "Time of a whole step.",
                         {}, LatencyBuckets())
          ->Get();
  HistogramFamily* phases = registry->AddHistogram(
      "pstrain_worker_step_phase_seconds",
      "Time of each part of a step: data (waiting for the batch), pull "
      "(variables and embedding rows), compute (forward and backward), push "
      "(gradients).",
      {"phase"}, LatencyBuckets());
  data_seconds = phases->Get({"data"});
  pull_seconds = phases->Get({"pull"});
  compute_seconds = phases->Get({"compute"});
  push_seconds = phases->Get({"push"});
  stale_pushes = registry
                     ->AddCounter("pstrain_worker_stale_pushes_total",
                                  "Async gradients the ps refused as too "
                                  "stale (the step is dropped).")
                     ->Get();
  resyncs = registry
                ->AddCounter("pstrain_worker_resyncs_total",
                             "Times this worker asked the chief where to go "
                             "on after a peer failure (a step retried or "
                             "resumed from a checkpoint).")
                ->Get();
  ps_retries = registry
                   ->AddCounter("pstrain_worker_ps_retries_total",
                                "Calls to a ps tried again after it was "
                                "unavailable (within the client's retry "
                                "loop).")
                   ->Get();
}

}  // namespace worker
}  // namespace pstrain
