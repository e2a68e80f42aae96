#include "compute/cpu/thread_count_tuner.h"

#include <algorithm>
#include <vector>

namespace pstrain {
namespace worker {
namespace cpu {

void ThreadCountTuner::Record(bool many, absl::Duration elapsed,
                              int64_t examples) {
  // A step of another setting than asked for, or of no examples, says
  // nothing about the settings' speeds.
  if (many != UseManyThreads() || examples <= 0) return;
  const double per_example =
      absl::ToDoubleSeconds(elapsed) / static_cast<double>(examples);
  if (probing_ > 0) {
    if (--probing_ > 0) return;  // the probe's warm-up step
    if (per_example < kSwitchRatio * MedianOfWindow()) {
      many_ = !many_;
      ++switches_;
      window_.clear();
      window_.push_back(per_example);
      interval_ = kFirstInterval;
    } else {
      interval_ = std::min(2 * interval_, kMaxInterval);
    }
    steps_to_probe_ = interval_;
    return;
  }
  window_.push_back(per_example);
  if (window_.size() > kWindow) window_.pop_front();
  if (--steps_to_probe_ <= 0) probing_ = kProbeSteps;
}

double ThreadCountTuner::MedianOfWindow() const {
  std::vector<double> sorted(window_.begin(), window_.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
