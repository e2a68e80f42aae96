#include "worker/cpu/losses.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

absl::Status CheckArgs(const char* loss, const void* input,
                       const void* second_input, int64_t batch,
                       int64_t classes) {
  if (batch <= 0 || classes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(loss, ": batch and classes must be positive, got ", batch,
                     " and ", classes));
  }
  if (input == nullptr || second_input == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(loss, ": inputs are required"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const char* loss, const int32_t* labels, int64_t batch,
                         int64_t classes) {
  for (int64_t i = 0; i < batch; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(loss, ": label ", labels[i], " of example ", i,
                       " is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> SparseSoftmaxCrossEntropyFromLogits(
    const float* logits, const int32_t* labels, int64_t batch, int64_t classes,
    float* dlogits) {
  constexpr char kLoss[] = "SparseSoftmaxCrossEntropyFromLogits";
  absl::Status status = CheckArgs(kLoss, logits, labels, batch, classes);
  if (status.ok()) status = CheckLabels(kLoss, labels, batch, classes);
  if (!status.ok()) return status;
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = logits + i * classes;
    const double max = *std::max_element(row, row + classes);
    double sum_exp = 0;
    for (int64_t j = 0; j < classes; ++j) sum_exp += std::exp(row[j] - max);
    const double log_sum_exp = max + std::log(sum_exp);
    total += log_sum_exp - row[labels[i]];
    if (dlogits == nullptr) continue;
    float* grad = dlogits + i * classes;
    for (int64_t j = 0; j < classes; ++j) {
      grad[j] = static_cast<float>(std::exp(row[j] - log_sum_exp));
    }
    grad[labels[i]] -= 1.0f;
  }
  return total;
}

absl::StatusOr<double> SparseCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, int64_t classes,
    float* dprobs) {
  constexpr char kLoss[] = "SparseCrossEntropyFromProbabilities";
  absl::Status status = CheckArgs(kLoss, probs, labels, batch, classes);
  if (status.ok()) status = CheckLabels(kLoss, labels, batch, classes);
  if (!status.ok()) return status;
  // Keras clips in the tensor's dtype: float32 bounds.
  constexpr float kLow = kKerasEpsilon;
  constexpr float kHigh = 1.0f - kKerasEpsilon;
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = probs + i * classes;
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) {
      sum += std::clamp(row[j], kLow, kHigh);
    }
    const double clipped_label = std::clamp(row[labels[i]], kLow, kHigh);
    total += std::log(sum) - std::log(clipped_label);
    if (dprobs == nullptr) continue;
    float* grad = dprobs + i * classes;
    for (int64_t j = 0; j < classes; ++j) {
      // Like tf.clip_by_value, the gradient passes where low <= p <= high.
      if (!(row[j] >= kLow && row[j] <= kHigh)) {
        grad[j] = 0.0f;
        continue;
      }
      double g = 1.0 / sum;
      if (j == labels[i]) g -= 1.0 / clipped_label;
      grad[j] = static_cast<float>(g);
    }
  }
  return total;
}

absl::StatusOr<double> MeanSquaredErrorSum(const float* predictions,
                                           const float* targets, int64_t batch,
                                           int64_t outputs,
                                           float* dpredictions) {
  absl::Status status =
      CheckArgs("MeanSquaredErrorSum", predictions, targets, batch, outputs);
  if (!status.ok()) return status;
  double total = 0;
  const int64_t n = batch * outputs;
  for (int64_t k = 0; k < n; ++k) {
    const double diff = static_cast<double>(predictions[k]) - targets[k];
    total += diff * diff;
    if (dpredictions != nullptr) {
      dpredictions[k] = static_cast<float>(2.0 * diff / outputs);
    }
  }
  return total / outputs;
}

absl::StatusOr<int64_t> CountCorrect(const float* scores, const int32_t* labels,
                                     int64_t batch, int64_t classes) {
  absl::Status status =
      CheckArgs("CountCorrect", scores, labels, batch, classes);
  if (status.ok()) status = CheckLabels("CountCorrect", labels, batch, classes);
  if (!status.ok()) return status;
  int64_t correct = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = scores + i * classes;
    const int64_t argmax = std::max_element(row, row + classes) - row;
    if (argmax == labels[i]) ++correct;
  }
  return correct;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
