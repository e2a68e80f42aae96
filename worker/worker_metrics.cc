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
  CounterFamily* ps_bytes = registry->AddCounter(
      "pstrain_worker_ps_bytes_total",
      "Bytes of the serialized messages of this worker's pushes and pulls "
      "to and from the ps tasks (without gRPC's framing).",
      {"direction"});
  ps_bytes_sent = ps_bytes->Get({"sent"});
  ps_bytes_received = ps_bytes->Get({"received"});
  CounterFamily* group_bytes = registry->AddCounter(
      "pstrain_worker_group_bytes_total",
      "Bytes of activations and gradients this worker sent to and received "
      "from the other members of its model-parallel group (the payload of "
      "the ring's chunks).",
      {"direction"});
  group_bytes_sent = group_bytes->Get({"sent"});
  group_bytes_received = group_bytes->Get({"received"});
}

void WorkerMetrics::CountPsCalls(ps::PsClientOptions* options) const {
  options->retry.on_retry = [c = ps_retries] { c->Increment(); };
  options->bytes_sent = ps_bytes_sent;
  options->bytes_received = ps_bytes_received;
}

}  // namespace worker
}  // namespace pstrain
