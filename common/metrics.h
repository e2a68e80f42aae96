// Metrics of one process, and their rendering in the Prometheus text
// exposition format (what common/metrics_server.h serves at GET /metrics).
//
// A MetricsRegistry holds families of counters, gauges and histograms; a
// family has a name, a help line and label names, and one child per set of
// label values. The registry is passed to whoever records (an options
// struct's `metrics` pointer; null: no metrics), never reached as a global.
//
//   MetricsRegistry metrics;
//   Counter* steps = metrics.AddCounter("pstrain_worker_steps_total",
//                                       "Steps trained.")->Get();
//   Histogram* push = metrics.AddHistogram(
//       "pstrain_worker_push_seconds", "Push time.", {}, LatencyBuckets())
//       ->Get();
//   steps->Increment();
//   push->Observe(0.004);
//   std::string text = metrics.Render();
//
// Recording is cheap and lock-free: a child's address is stable for the
// registry's life, so hot paths look it up once (Get, with label values, takes
// the family's lock) and then only touch atomics. Gauges that mirror state
// held elsewhere (bytes of variables, tasks alive) are set by collectors,
// functions the registry calls before each Render, so the state's owner pays
// nothing between scrapes.
//
// Names follow Prometheus's rules ([a-zA-Z_:][a-zA-Z0-9_:]*, labels without
// a leading "__"); a bad name, or a name used twice, is a programming error:
// the process aborts with a message naming it. Thread-safe.
#ifndef PSTRAIN_COMMON_METRICS_H_
#define PSTRAIN_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// A value that only goes up (Prometheus counter).
class Counter {
 public:
  // REQUIRES: amount >= 0 (a negative amount is ignored).
  void Increment(double amount = 1);
  double Value() const;

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (Prometheus gauge).
class Gauge {
 public:
  void Set(double value);
  void Add(double amount);
  double Value() const;

 private:
  std::atomic<double> value_{0};
};

// Observations counted in buckets by upper bound (Prometheus histogram).
class Histogram {
 public:
  // `bounds`: strictly increasing finite upper bounds; +Inf is implied.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  // Per bucket, not cumulative; the last is (bounds_.back(), +Inf).
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// Bucket bounds for latencies in seconds: 100 µs to about 100 s.
std::vector<double> LatencyBuckets();
// Bucket bounds for sizes in bytes: 1 KiB to 1 GiB, by factors of 4.
std::vector<double> SizeBuckets();

// A metric's children by label values.
template <typename T>
class MetricFamily {
 public:
  MetricFamily(std::vector<std::string> label_names,
               std::function<std::unique_ptr<T>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // The child of these label values (one per label name; a wrong count is a
  // programming error), made on first use. The pointer lives as long as the
  // registry.
  T* Get(const std::vector<std::string>& label_values = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<std::string>& label_names() const { return label_names_; }
  // Calls `visit` with each child, in label-value order.
  void ForEach(const std::function<void(const std::vector<std::string>&,
                                        const T&)>& visit) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<T>()> make_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_
      ABSL_GUARDED_BY(mu_);
};

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each adds a family; the pointer lives as long as the registry.
  CounterFamily* AddCounter(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  GaugeFamily* AddGauge(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  HistogramFamily* AddHistogram(const std::string& name,
                                const std::string& help,
                                std::vector<std::string> label_names,
                                std::vector<double> bounds)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `collect` runs before each Render (on the rendering thread, under no
  // lock of the registry's): it sets gauges from state kept elsewhere.
  void AddCollector(std::function<void()> collect) ABSL_LOCKS_EXCLUDED(mu_);

  // Every family in the text exposition format (version 0.0.4), in the
  // order added: "# HELP", "# TYPE", then one line per child (histograms:
  // _bucket{le=...} cumulative up to "+Inf", _sum, _count).
  std::string Render() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string name;
    std::string help;
    enum class Type { kCounter, kGauge, kHistogram } type;
    std::unique_ptr<CounterFamily> counters;
    std::unique_ptr<GaugeFamily> gauges;
    std::unique_ptr<HistogramFamily> histograms;
  };
  Entry& Add(const std::string& name, const std::string& help,
             const std::vector<std::string>& label_names, Entry::Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(mu_);
};

// Helpers for the exposition format, exposed for tests.
// `value` escaped for a label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& value);
// `text` escaped for a HELP line (backslash, newline).
std::string EscapeHelp(const std::string& text);
// A sample value: integers without a fraction, "+Inf", "-Inf", "NaN".
std::string FormatSampleValue(double value);

// Adds what every pstrain process exposes: pstrain_build_info{version,
// role, device} = 1 and process_start_time_seconds (now, as Unix time).
void AddProcessMetrics(MetricsRegistry* registry, const std::string& role,
                       const std::string& device);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_METRICS_H_
