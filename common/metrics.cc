#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/process.h"

namespace pstrain {
namespace {

// A metric defined wrongly in the code: no input reaches here.
[[noreturn]] void ProgrammingError(const std::string& what) {
  std::cerr << "metrics: " << what << std::endl;
  std::abort();
}

void AtomicAdd(std::atomic<double>* target, double amount) {
  double old = target->load(std::memory_order_relaxed);
  while (!target->compare_exchange_weak(old, old + amount,
                                        std::memory_order_relaxed)) {
  }
}

bool ValidName(const std::string& name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        c == '_' || (colon && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// `{a="x",b="y"}`, with `extra` (already formatted, e.g. le="0.1") last;
// "" when there is no label at all.
std::string Labels(const std::vector<std::string>& names,
                   const std::vector<std::string>& values,
                   const std::string& extra = "") {
  std::vector<std::string> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    parts.push_back(
        absl::StrCat(names[i], "=\"", EscapeLabelValue(values[i]), "\""));
  }
  if (!extra.empty()) parts.push_back(extra);
  if (parts.empty()) return "";
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

}  // namespace

void Counter::Increment(double amount) {
  if (amount > 0) AtomicAdd(&value_, amount);
}
double Counter::Value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::Set(double value) {
  value_.store(value, std::memory_order_relaxed);
}
void Gauge::Add(double amount) { AtomicAdd(&value_, amount); }
double Gauge::Value() const { return value_.load(std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      ProgrammingError("histogram bounds must be finite and increasing");
    }
  }
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i] = 0;
}

void Histogram::Observe(double value) {
  // The first bound >= value: Prometheus buckets are "less or equal".
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(&sum_, value);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.bounds = bounds_;
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative.push_back(total);
  }
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,   0.5,     1,      2.5,   5,      10,    25,   50,    100};
}

std::vector<double> SizeBuckets() {
  std::vector<double> bounds;
  for (double b = 1024; b <= double{1 << 30}; b *= 4) bounds.push_back(b);
  return bounds;
}

template <typename T>
T* MetricFamily<T>::Get(const std::vector<std::string>& label_values) {
  if (label_values.size() != label_names_.size()) {
    ProgrammingError(absl::StrCat("expected ", label_names_.size(),
                                  " label values, got ", label_values.size()));
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<T>& child = children_[label_values];
  if (child == nullptr) child = make_();
  return child.get();
}

template <typename T>
void MetricFamily<T>::ForEach(
    const std::function<void(const std::vector<std::string>&, const T&)>& visit)
    const {
  absl::MutexLock lock(&mu_);
  for (const auto& [values, child] : children_) visit(values, *child);
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

MetricsRegistry::Entry& MetricsRegistry::Add(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names, Entry::Type type) {
  if (!ValidName(name, /*colon=*/true)) {
    ProgrammingError(absl::StrCat("bad metric name \"", name, "\""));
  }
  for (const std::unique_ptr<Entry>& entry : entries_) {
    if (entry->name == name) {
      ProgrammingError(absl::StrCat("metric \"", name, "\" added twice"));
    }
  }
  for (const std::string& label : label_names) {
    if (!ValidName(label, /*colon=*/false) || label.rfind("__", 0) == 0 ||
        (type == Entry::Type::kHistogram && label == "le")) {
      ProgrammingError(
          absl::StrCat("bad label name \"", label, "\" of ", name));
    }
  }
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->help = help;
  entry->type = type;
  entries_.push_back(std::move(entry));
  return *entries_.back();
}

CounterFamily* MetricsRegistry::AddCounter(
    const std::string& name, const std::string& help,
    std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  Entry& entry = Add(name, help, label_names, Entry::Type::kCounter);
  entry.counters = std::make_unique<CounterFamily>(
      std::move(label_names), [] { return std::make_unique<Counter>(); });
  return entry.counters.get();
}

GaugeFamily* MetricsRegistry::AddGauge(const std::string& name,
                                       const std::string& help,
                                       std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  Entry& entry = Add(name, help, label_names, Entry::Type::kGauge);
  entry.gauges = std::make_unique<GaugeFamily>(
      std::move(label_names), [] { return std::make_unique<Gauge>(); });
  return entry.gauges.get();
}

HistogramFamily* MetricsRegistry::AddHistogram(
    const std::string& name, const std::string& help,
    std::vector<std::string> label_names, std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  Entry& entry = Add(name, help, label_names, Entry::Type::kHistogram);
  Histogram check(bounds);  // aborts on bad bounds now, not at first use
  entry.histograms = std::make_unique<HistogramFamily>(
      std::move(label_names),
      [bounds] { return std::make_unique<Histogram>(bounds); });
  return entry.histograms.get();
}

void MetricsRegistry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::string MetricsRegistry::Render() const {
  std::vector<std::function<void()>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  for (const std::function<void()>& collect : collectors) collect();

  absl::MutexLock lock(&mu_);
  std::string out;
  for (const std::unique_ptr<Entry>& entry : entries_) {
    const std::string& name = entry->name;
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(entry->help), "\n");
    switch (entry->type) {
      case Entry::Type::kCounter:
        absl::StrAppend(&out, "# TYPE ", name, " counter\n");
        entry->counters->ForEach([&](const std::vector<std::string>& values,
                                     const Counter& counter) {
          absl::StrAppend(&out, name,
                          Labels(entry->counters->label_names(), values), " ",
                          FormatSampleValue(counter.Value()), "\n");
        });
        break;
      case Entry::Type::kGauge:
        absl::StrAppend(&out, "# TYPE ", name, " gauge\n");
        entry->gauges->ForEach(
            [&](const std::vector<std::string>& values, const Gauge& gauge) {
              absl::StrAppend(&out, name,
                              Labels(entry->gauges->label_names(), values), " ",
                              FormatSampleValue(gauge.Value()), "\n");
            });
        break;
      case Entry::Type::kHistogram:
        absl::StrAppend(&out, "# TYPE ", name, " histogram\n");
        entry->histograms->ForEach([&](const std::vector<std::string>& values,
                                       const Histogram& histogram) {
          const std::vector<std::string>& names =
              entry->histograms->label_names();
          const Histogram::Snapshot s = histogram.Read();
          for (size_t i = 0; i <= s.bounds.size(); ++i) {
            const std::string le =
                i < s.bounds.size() ? FormatSampleValue(s.bounds[i]) : "+Inf";
            absl::StrAppend(
                &out, name, "_bucket",
                Labels(names, values, absl::StrCat("le=\"", le, "\"")), " ",
                s.cumulative[i], "\n");
          }
          absl::StrAppend(&out, name, "_sum", Labels(names, values), " ",
                          FormatSampleValue(s.sum), "\n");
          absl::StrAppend(&out, name, "_count", Labels(names, values), " ",
                          s.cumulative.back(), "\n");
        });
        break;
    }
  }
  return out;
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

void AddProcessMetrics(MetricsRegistry* registry, const std::string& role,
                       const std::string& device) {
  registry
      ->AddGauge("pstrain_build_info",
                 "1, labelled with this process's build and role.",
                 {"version", "role", "device"})
      ->Get({BuildInfo(), role, device})
      ->Set(1);
  registry
      ->AddGauge("process_start_time_seconds",
                 "Start time of the process since the Unix epoch, in seconds.")
      ->Get()
      ->Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
}

}  // namespace pstrain
