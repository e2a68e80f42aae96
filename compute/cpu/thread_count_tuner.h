// Chooses, while a run trains, between computing on all of a worker's
// threads and on one, by timing both: what lets a worker on a shared host
// keep its speed when another process takes a core (issue 20, item 4).
//
// On an idle 2-core host the seed CNN trains about 1.8x faster on 2 threads
// than on 1. When another process holds one core, the 2 threads share the
// other and each parallel region waits for the one that is not running, and
// the same step takes about twice as long as on 1 thread. No setting is best
// in both cases and the host's load changes while a run trains, so the
// tuner measures: every so often it runs a few steps on the other setting,
// compares their time per example with the recent steps' of the current
// one, and switches when the other is clearly faster.
//
//   ThreadCountTuner tuner;
//   for (...) {
//     const bool many = tuner.UseManyThreads();
//     absl::Time start = absl::Now();
//     ... one step on the many- or the one-thread backend, `batch` examples
//     tuner.Record(many, absl::Now() - start, batch);
//   }
//
// Probes: after kFirstProbe steps, then at intervals that double (up to
// kMaxInterval) while the current setting stays the faster and return to
// kFirstInterval after a switch, the tuner asks for kProbeSteps steps of the
// other setting; the first warms its caches (oneDNN makes its primitives on
// the first step of each batch size) and only the last is timed. It switches
// when that step's time per example is below kSwitchRatio times the median
// of the current setting's last kWindow steps. Pure logic; not thread-safe.
#ifndef PSTRAIN_COMPUTE_CPU_THREAD_COUNT_TUNER_H_
#define PSTRAIN_COMPUTE_CPU_THREAD_COUNT_TUNER_H_

#include <cstdint>
#include <deque>

#include "absl/time/time.h"

namespace pstrain {
namespace worker {
namespace cpu {

class ThreadCountTuner {
 public:
  static constexpr int kFirstProbe = 4;
  static constexpr int kFirstInterval = 16;
  static constexpr int kMaxInterval = 512;
  static constexpr int kProbeSteps = 2;
  static constexpr int kWindow = 8;
  static constexpr double kSwitchRatio = 0.9;

  // Whether the next step runs on all threads (else on one).
  bool UseManyThreads() const { return probing_ > 0 ? !many_ : many_; }

  // The step just run: on all threads or one (what UseManyThreads said), how
  // long it took, and its examples (a step of 0 examples is not timed).
  void Record(bool many, absl::Duration elapsed, int64_t examples);

  // Switches so far, for logs and tests.
  int switches() const { return switches_; }

 private:
  double MedianOfWindow() const;

  bool many_ = true;  // the current setting
  // Steps left of the current probe of the other setting (0: not probing).
  int probing_ = 0;
  int steps_to_probe_ = kFirstProbe;
  int interval_ = kFirstInterval;
  int switches_ = 0;
  std::deque<double> window_;  // seconds per example, current setting
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_THREAD_COUNT_TUNER_H_
