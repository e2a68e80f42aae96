#include "chief/evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {

double ExactAuc(absl::Span<const float> scores,
                absl::Span<const int32_t> labels) {
  constexpr double kUndefined = std::numeric_limits<double>::quiet_NaN();
  const size_t n = std::min(scores.size(), labels.size());
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(scores[i])) return kUndefined;
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Walking up the scores, group by group of equal scores: each positive
  // beats every negative below its group and ties half of those in it.
  double wins = 0;
  double negatives_below = 0;
  double positives = 0;
  for (size_t begin = 0; begin < n;) {
    size_t end = begin;
    double group_positives = 0, group_negatives = 0;
    while (end < n && scores[order[end]] == scores[order[begin]]) {
      (labels[order[end]] == 1 ? group_positives : group_negatives) += 1;
      ++end;
    }
    wins += group_positives * (negatives_below + 0.5 * group_negatives);
    negatives_below += group_negatives;
    positives += group_positives;
    begin = end;
  }
  const double negatives = negatives_below;
  if (positives == 0 || negatives == 0) return kUndefined;
  return wins / (positives * negatives);
}

absl::StatusOr<Evaluation> EvaluateOnTestSet(worker::Backend* backend,
                                             const data::Dataset& test,
                                             const worker::Weights& weights,
                                             int64_t version, int64_t batch,
                                             bool binary_metrics) {
  const int64_t n = test.size();
  const int64_t per_example = test.features.row_elements();
  // float32, or int32 ids for a model that starts with an Embedding.
  PSTRAIN_ASSIGN_OR_RETURN(
      Tensor features,
      Tensor::Create(data::FeedDtype(test), {batch, per_example}));
  std::vector<int64_t> indices;
  std::vector<float> scores(binary_metrics ? n : 0);
  std::vector<float> probabilities(binary_metrics ? batch : 0);
  CtrMetrics ctr;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int64_t size = std::min(batch, n - begin);
    indices.resize(size);
    for (int64_t i = 0; i < size; ++i) indices[i] = begin + i;
    data::GatherExamples(test, indices, features.raw_data());
    worker::StepInput input;
    input.features = features.raw_data();
    input.labels = test.labels.data() + begin;
    input.batch = size;
    input.weights_version = version;
    if (binary_metrics) {
      input.scores = scores.data() + begin;
      input.probabilities = probabilities.data();
    }
    PSTRAIN_ASSIGN_OR_RETURN(worker::StepResult r,
                             backend->Evaluate(input, weights));
    if (binary_metrics) {
      ctr.Add(absl::MakeConstSpan(probabilities.data(), size),
              absl::MakeConstSpan(test.labels.data() + begin, size));
    }
    loss += r.loss_sum;
    correct += r.correct;
  }
  Evaluation eval;
  eval.examples = n;
  eval.loss = n > 0 ? loss / n : 0;
  eval.accuracy = n > 0 ? static_cast<double>(correct) / n : 0;
  if (binary_metrics) {
    eval.auc = ExactAuc(scores, absl::MakeConstSpan(test.labels.data(), n));
    SetCtrMetrics(ctr, &eval);
  }
  return eval;
}

void SetCtrMetrics(const CtrMetrics& ctr, Evaluation* eval) {
  eval->log_loss = ctr.log_loss();
  eval->calibration = ctr.calibration();
  eval->mean_prediction = ctr.mean_prediction();
  eval->positive_rate = ctr.positive_rate();
}

std::string FormatEvaluation(const Evaluation& eval) {
  std::string text = absl::StrFormat("test_loss %.4f  test_acc %.4f", eval.loss,
                                     eval.accuracy);
  if (eval.auc.has_value()) {
    absl::StrAppendFormat(&text, "  test_auc %.4f", *eval.auc);
  }
  if (eval.log_loss.has_value()) {
    absl::StrAppendFormat(&text, "  test_logloss %.4f", *eval.log_loss);
  }
  if (eval.calibration.has_value()) {
    absl::StrAppendFormat(&text, "  test_calibration %.3f", *eval.calibration);
  }
  return text;
}

}  // namespace chief
}  // namespace pstrain
