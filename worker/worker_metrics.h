// What a worker exposes to Prometheus (common/metrics.h): steps and
// examples trained, the time of each step and of its parts (waiting for
// data, pulling, computing, pushing), gradients refused as too stale,
// resyncs after a peer failure, and the bytes the worker moves: to and
// from the ps tasks (its PsClients count them, PsClientOptions::bytes_*)
// and within its model-parallel group (parallel/ring_group_collective.h).
// The Trainer records the rest (TrainerOptions::metrics).
#ifndef PSTRAIN_WORKER_WORKER_METRICS_H_
#define PSTRAIN_WORKER_WORKER_METRICS_H_

#include "common/metrics.h"
#include "ps/ps_client.h"

namespace pstrain {
namespace worker {

struct WorkerMetrics {
  // Adds the worker's families to `registry`, which must outlive this.
  explicit WorkerMetrics(MetricsRegistry* registry);

  // Has a PsClient with `options` count its retries and bytes here.
  void CountPsCalls(ps::PsClientOptions* options) const;

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
  // pstrain_worker_ps_bytes_total{direction="sent"|"received"}: serialized
  // messages of dense and sparse pushes and pulls.
  Counter* ps_bytes_sent;
  Counter* ps_bytes_received;
  // pstrain_worker_group_bytes_total{direction=...}: the payload the ring
  // of a model-parallel group moves for this member's collectives.
  Counter* group_bytes_sent;
  Counter* group_bytes_received;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_WORKER_METRICS_H_
