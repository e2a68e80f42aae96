// Loss and metrics of a model's weights on a test set: what the chief
// prints at each epoch's end and writes to summary.json, computed by the
// chief itself or by the evaluator task (chief/evaluator.h).
//
//   PSTRAIN_ASSIGN_OR_RETURN(
//       Evaluation eval,
//       EvaluateOnTestSet(backend, test, weights, version, /*batch=*/500,
//                         /*binary_metrics=*/true));
//   LogInfo(FormatEvaluation(eval));  // "test_loss 0.3120  test_acc ..."
#ifndef PSTRAIN_CHIEF_EVALUATION_H_
#define PSTRAIN_CHIEF_EVALUATION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chief/ctr_metrics.h"
#include "compute/backend.h"
#include "data/dataset.h"

namespace pstrain {
namespace chief {

// Test-set loss and metrics.
struct Evaluation {
  double loss = 0;
  // The backend's accuracy: argmax equals the label, or for binary
  // cross-entropy Keras's binary accuracy (probability > 0.5).
  double accuracy = 0;
  // For binary outputs (binary_metrics): the ROC AUC, exact (ExactAuc).
  std::optional<double> auc;
  // For binary outputs too (chief/ctr_metrics.h): the log loss of the
  // probabilities (with a final sigmoid, the loss itself) and the
  // calibration, mean prediction / positive rate (NaN without positives).
  std::optional<double> log_loss = std::nullopt;
  std::optional<double> calibration = std::nullopt;
  double mean_prediction = 0;
  double positive_rate = 0;
  // Examples evaluated.
  int64_t examples = 0;
};

// The area under the ROC curve of `scores` for labels 1 (positive) against
// the others, exact over all the examples: the probability that a random
// positive scores above a random negative, a tie counting one half (the
// trapezoid rule over the ROC curve; the Mann-Whitney statistic with average
// ranks). Keras's AUC metric approximates it with 200 thresholds; this one
// does not. NaN when either class is missing or a score is NaN.
// REQUIRES: scores.size() == labels.size().
double ExactAuc(absl::Span<const float> scores,
                absl::Span<const int32_t> labels);

// Evaluates `weights` (of version `version`) on every example of `test`, in
// batches of `batch` examples; with `binary_metrics` (binary cross-entropy:
// a model with one output unit) also the AUC, from the scores the backend
// gives (StepInput::scores).
absl::StatusOr<Evaluation> EvaluateOnTestSet(worker::Backend* backend,
                                             const data::Dataset& test,
                                             const worker::Weights& weights,
                                             int64_t version, int64_t batch,
                                             bool binary_metrics = false);

// "test_loss 0.3120  test_acc 0.8870", then "  test_auc 0.9412" when there
// is an AUC, and "  test_logloss 0.4420  test_calibration 1.013" when there
// is a log loss: the figures of the chief's and the evaluator's log lines.
std::string FormatEvaluation(const Evaluation& eval);

// Sets eval's log loss and calibration figures from `ctr`.
void SetCtrMetrics(const CtrMetrics& ctr, Evaluation* eval);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EVALUATION_H_
