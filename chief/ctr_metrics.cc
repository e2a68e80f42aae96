#include "chief/ctr_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pstrain {
namespace chief {

void CtrMetrics::Add(double probability, int32_t label) {
  const double p = std::clamp(probability, kEpsilon, 1.0 - kEpsilon);
  ++examples_;
  probability_sum_ += probability;
  if (label == 1) {
    ++positives_;
    log_loss_sum_ -= std::log(p);
  } else {
    log_loss_sum_ -= std::log1p(-p);
  }
}

void CtrMetrics::Add(absl::Span<const float> probabilities,
                     absl::Span<const int32_t> labels) {
  const size_t n = std::min(probabilities.size(), labels.size());
  for (size_t i = 0; i < n; ++i) Add(probabilities[i], labels[i]);
}

double CtrMetrics::log_loss() const {
  return examples_ > 0 ? log_loss_sum_ / examples_ : 0;
}

double CtrMetrics::mean_prediction() const {
  return examples_ > 0 ? probability_sum_ / examples_ : 0;
}

double CtrMetrics::positive_rate() const {
  return examples_ > 0 ? static_cast<double>(positives_) / examples_ : 0;
}

double CtrMetrics::calibration() const {
  if (positives_ == 0) return std::numeric_limits<double>::quiet_NaN();
  return mean_prediction() / positive_rate();
}

}  // namespace chief
}  // namespace pstrain
