#include "ps/ps_metrics.h"

#include "proto/ps_service.pb.h"

namespace pstrain {
namespace ps {

PsMetrics::PsMetrics(MetricsRegistry* registry)
    : registry_(registry),
      seconds_(registry->AddHistogram(
          "pstrain_ps_request_duration_seconds",
          "Time from a request's arrival (whole) to its answer, by method.",
          {"method"}, LatencyBuckets())),
      requests_(registry->AddCounter("pstrain_ps_requests_total",
                                     "Requests answered, by method.",
                                     {"method"})),
      errors_(registry->AddCounter(
          "pstrain_ps_request_errors_total",
          "Requests answered with an error status, by method.", {"method"})),
      received_(registry->AddCounter("pstrain_ps_received_bytes_total",
                                     "Bytes of request messages, by method.",
                                     {"method"})),
      sent_(registry->AddCounter("pstrain_ps_sent_bytes_total",
                                 "Bytes of reply messages, by method.",
                                 {"method"})),
      pushes_(registry->AddCounter(
          "pstrain_ps_pushes_total",
          "Pushes received, by dense variable or embedding table.",
          {"variable"})),
      pulls_(registry->AddCounter(
          "pstrain_ps_pulls_total",
          "Pulls answered, by dense variable or embedding table.",
          {"variable"})),
      sync_wait_(registry
                     ->AddHistogram("pstrain_ps_sync_pull_wait_seconds",
                                    "Time a sync pull took, from its arrival "
                                    "to its answer, waiting for its step.",
                                    {}, LatencyBuckets())
                     ->Get()),
      save_seconds_(registry
                        ->AddHistogram("pstrain_ps_checkpoint_save_seconds",
                                       "Time to write this task's part of a "
                                       "checkpoint.",
                                       {}, LatencyBuckets())
                        ->Get()),
      save_bytes_(registry
                      ->AddGauge("pstrain_ps_checkpoint_size_bytes",
                                 "Size of this task's part of the latest "
                                 "checkpoint written.")
                      ->Get()) {}

PsMetrics::Method PsMetrics::ForMethod(const std::string& name) {
  return {requests_->Get({name}), errors_->Get({name}), seconds_->Get({name}),
          received_->Get({name}), sent_->Get({name})};
}

PsMetrics::Variable& PsMetrics::ForVariable(const std::string& name) {
  auto it = variables_.find(name);
  if (it == variables_.end()) {
    it = variables_
             .emplace(name, Variable{pushes_->Get({name}), pulls_->Get({name})})
             .first;
  }
  return it->second;
}

void PsMetrics::CountPush(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ForVariable(name).pushes->Increment();
}

void PsMetrics::CountPull(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ForVariable(name).pulls->Increment();
}

void PsMetrics::ObserveSave(double seconds, int64_t bytes) {
  save_seconds_->Observe(seconds);
  save_bytes_->Set(bytes);
}

void PsMetrics::AddShardCollector(Shard* shard) {
  Gauge* variables = registry_
                         ->AddGauge("pstrain_ps_variables",
                                    "Variable pieces (dense variables and "
                                    "embedding tables) this task holds.")
                         ->Get();
  Gauge* bytes = registry_
                     ->AddGauge("pstrain_ps_held_bytes",
                                "Bytes of variables and optimizer slots this "
                                "task holds.")
                     ->Get();
  Gauge* slot_bytes = registry_
                          ->AddGauge("pstrain_ps_slot_bytes",
                                     "Of pstrain_ps_held_bytes, those of the "
                                     "optimizer slots.")
                          ->Get();
  Gauge* version = registry_
                       ->AddGauge("pstrain_ps_version",
                                  "Sync: steps applied. Async: pushes "
                                  "applied.")
                       ->Get();
  Gauge* generation =
      registry_
          ->AddGauge("pstrain_ps_generation",
                     "The recovery generation this task serves.")
          ->Get();
  // Counters the Shard keeps: exposed as gauges of their running totals
  // would lose Prometheus's reset handling, so counters set by difference.
  CounterFamily* pushes = registry_->AddCounter(
      "pstrain_ps_dense_pushes_total",
      "Dense pushes by outcome: applied, dropped_stale (a late backup "
      "worker's, sync), refused (bad input, staleness bound, NaN).",
      {"outcome"});
  Counter* applied = pushes->Get({"applied"});
  Counter* dropped = pushes->Get({"dropped_stale"});
  Counter* refused = pushes->Get({"refused"});
  GaugeFamily* rows = registry_->AddGauge(
      "pstrain_ps_embedding_rows",
      "Rows an embedding table holds on this task.", {"table"});
  GaugeFamily* row_bytes = registry_->AddGauge(
      "pstrain_ps_embedding_row_bytes",
      "Bytes one row of an embedding table costs on this task: value, "
      "optimizer slots and (growing tables) id, update count, last-update "
      "step and hash-map entry.",
      {"table"});
  GaugeFamily* metadata_bytes = registry_->AddGauge(
      "pstrain_ps_embedding_metadata_bytes",
      "Bytes of an embedding table's bookkeeping beside its values and "
      "slots (ids, lifecycle data, hash maps, pending admission counts).",
      {"table"});
  GaugeFamily* pending =
      registry_->AddGauge("pstrain_ps_embedding_pending_ids",
                          "Ids of a growing table counted but not admitted yet "
                          "(--embedding_min_count).",
                          {"table"});
  GaugeFamily* removed = registry_->AddGauge(
      "pstrain_ps_embedding_rows_removed",
      "Rows of a growing table removed since the task started, by reason: "
      "ttl (--embedding_ttl_steps) or lfu (--embedding_max_rows).",
      {"table", "reason"});
  registry_->AddCollector([=] {
    for (const auto& [table, count] : shard->EmbeddingRows()) {
      rows->Get({table})->Set(count);
    }
    GetShardStatusRequest request;
    request.mutable_header()->set_run_id(shard->run_id());
    ShardStatus status;
    // Before CreateVariables, or as a restore replaces the run: counters only.
    (void)shard->GetShardStatus(request, &status);
    variables->Set(status.num_variables());
    bytes->Set(status.num_bytes());
    slot_bytes->Set(status.num_slot_bytes());
    version->Set(status.version());
    generation->Set(status.generation());
    applied->Increment(status.pushes_applied() - applied->Value());
    dropped->Increment(status.pushes_dropped_stale() - dropped->Value());
    refused->Increment(status.pushes_refused() - refused->Value());
    for (const auto& [table, t] : status.embedding_tables()) {
      row_bytes->Get({table})->Set(t.bytes_per_row());
      metadata_bytes->Get({table})->Set(t.metadata_bytes());
      pending->Get({table})->Set(t.pending_ids());
      removed->Get({table, "ttl"})->Set(t.rows_expired());
      removed->Get({table, "lfu"})->Set(t.rows_evicted());
    }
  });
}

}  // namespace ps
}  // namespace pstrain
