// What a ps task exposes to Prometheus (common/metrics.h): requests by
// method (count, errors, latency, bytes in and out), pushes and pulls by
// variable or table, the time sync pulls wait for their step, and, read
// from the Shard at each scrape, what it holds (variables, bytes) and its
// push counters (applied, stale dropped, refused).
//
//   MetricsRegistry registry;
//   PsMetrics metrics(&registry);
//   metrics.AddShardCollector(&shard);
//   PsServiceOptions options;
//   options.metrics = &metrics;
//
// Thread-safe; a request's recording touches only atomics, except the first
// time a variable is seen (one map lookup under a lock per variable and
// call).
#ifndef PSTRAIN_PS_PS_METRICS_H_
#define PSTRAIN_PS_PS_METRICS_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "ps/shard.h"

namespace pstrain {
namespace ps {

class PsMetrics {
 public:
  // The metrics of one RPC method.
  struct Method {
    Counter* requests;
    Counter* errors;  // answered with a status other than OK
    Histogram* seconds;
    Counter* received_bytes;
    Counter* sent_bytes;
  };

  // Adds the ps's families to `registry`, which must outlive this object.
  explicit PsMetrics(MetricsRegistry* registry);

  // The metrics of method `name` ("PushDense"); the pointer stays valid.
  Method ForMethod(const std::string& name);

  // A push or pull of variable or embedding table `name`.
  void CountPush(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  void CountPull(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // A pull that waited for its sync step took `seconds` to be served.
  void ObserveSyncWait(double seconds) { sync_wait_->Observe(seconds); }
  // A checkpoint of `bytes` written in `seconds`.
  void ObserveSave(double seconds, int64_t bytes);

  // At each scrape, reads `shard`'s status into gauges and counters.
  // `shard` must outlive the registry's last Render.
  void AddShardCollector(Shard* shard);

 private:
  struct Variable {
    Counter* pushes;
    Counter* pulls;
  };
  Variable& ForVariable(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  MetricsRegistry* const registry_;
  HistogramFamily* const seconds_;
  CounterFamily* const requests_;
  CounterFamily* const errors_;
  CounterFamily* const received_;
  CounterFamily* const sent_;
  CounterFamily* const pushes_;
  CounterFamily* const pulls_;
  Histogram* const sync_wait_;
  Histogram* const save_seconds_;
  Gauge* const save_bytes_;
  absl::Mutex mu_;
  std::unordered_map<std::string, Variable> variables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_PS_METRICS_H_
