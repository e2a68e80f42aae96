// The click-through-rate metrics of an evaluation beside the AUC
// (chief/evaluation.h): log loss, and calibration, the mean predicted
// probability over the rate of positives (1 when the model's probabilities
// are right on average; above 1 when it over-predicts clicks). Accumulated
// example by example, so that a test set streamed from files is never held.
//
//   CtrMetrics metrics;
//   for (...) metrics.Add(probability, label);
//   metrics.log_loss();  metrics.calibration();
//
// Not thread-safe.
#ifndef PSTRAIN_CHIEF_CTR_METRICS_H_
#define PSTRAIN_CHIEF_CTR_METRICS_H_

#include <cstdint>

#include "absl/types/span.h"

namespace pstrain {
namespace chief {

class CtrMetrics {
 public:
  // Probabilities are clipped to [1e-7, 1 - 1e-7] for the log loss, as
  // Keras's binary cross-entropy clips them.
  static constexpr double kEpsilon = 1e-7;

  // One example: `probability` of label 1 and its label (1 positive, any
  // other negative).
  void Add(double probability, int32_t label);
  void Add(absl::Span<const float> probabilities,
           absl::Span<const int32_t> labels);

  int64_t examples() const { return examples_; }
  // Mean of -(y log p + (1 - y) log(1 - p)); 0 without examples.
  double log_loss() const;
  // Mean probability, and the fraction of positives; 0 without examples.
  double mean_prediction() const;
  double positive_rate() const;
  // mean_prediction / positive_rate; NaN without positives.
  double calibration() const;

 private:
  int64_t examples_ = 0;
  int64_t positives_ = 0;
  double log_loss_sum_ = 0;
  double probability_sum_ = 0;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CTR_METRICS_H_
