#include "compute/cpu/losses.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

absl::Status CheckBinaryLabels(const char* loss, const int32_t* labels,
                               int64_t batch) {
  for (int64_t i = 0; i < batch; ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          loss, ": label ", labels[i], " of example ", i,
          " is not 0 or 1 (binary cross-entropy takes labels 0 and 1)"));
    }
  }
  return absl::OkStatus();
}

// Keras clips in the tensor's dtype: float32 bounds.
constexpr float kLow = kKerasEpsilon;
constexpr float kHigh = 1.0f - kKerasEpsilon;

// Whether tf.clip_by_value(p, kLow, kHigh) passes p's gradient.
bool InClipRange(double p) { return p >= kLow && p <= kHigh; }

double Sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
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

absl::StatusOr<double> SoftmaxCrossEntropyFromLogits(const float* logits,
                                                     const float* targets,
                                                     int64_t batch,
                                                     int64_t classes,
                                                     float* dlogits) {
  PSTRAIN_RETURN_IF_ERROR(CheckArgs("SoftmaxCrossEntropyFromLogits", logits,
                                    targets, batch, classes));
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = logits + i * classes;
    const float* target = targets + i * classes;
    const double max = *std::max_element(row, row + classes);
    double sum_exp = 0, target_sum = 0;
    for (int64_t j = 0; j < classes; ++j) {
      sum_exp += std::exp(row[j] - max);
      target_sum += target[j];
    }
    const double log_sum_exp = max + std::log(sum_exp);
    for (int64_t j = 0; j < classes; ++j) {
      if (target[j] != 0) total += target[j] * (log_sum_exp - row[j]);
    }
    if (dlogits == nullptr) continue;
    float* grad = dlogits + i * classes;
    for (int64_t j = 0; j < classes; ++j) {
      grad[j] = static_cast<float>(std::exp(row[j] - log_sum_exp) * target_sum -
                                   target[j]);
    }
  }
  return total;
}

absl::StatusOr<double> CategoricalCrossEntropyFromProbabilities(
    const float* probs, const float* targets, int64_t batch, int64_t classes,
    float* dprobs) {
  PSTRAIN_RETURN_IF_ERROR(CheckArgs("CategoricalCrossEntropyFromProbabilities",
                                    probs, targets, batch, classes));
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = probs + i * classes;
    const float* target = targets + i * classes;
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += row[j];
    // L = -sum_j t_j log(clip(q_j)), q_j = p_j / sum; where q_j is not
    // clipped, dL/dp_k gets t_j * (1 / sum - [j == k] / p_j).
    double passed_targets = 0;
    for (int64_t j = 0; j < classes; ++j) {
      if (target[j] == 0) continue;
      const double q = row[j] / sum;
      total -= target[j] * std::log(std::clamp(q, double{kLow}, double{kHigh}));
      if (InClipRange(q)) passed_targets += target[j];
    }
    if (dprobs == nullptr) continue;
    float* grad = dprobs + i * classes;
    for (int64_t j = 0; j < classes; ++j) {
      double g = passed_targets / sum;
      if (target[j] != 0 && InClipRange(row[j] / sum)) g -= target[j] / row[j];
      grad[j] = static_cast<float>(g);
    }
  }
  return total;
}

absl::StatusOr<double> SigmoidCrossEntropyFromLogits(const float* logits,
                                                     const int32_t* labels,
                                                     int64_t batch,
                                                     float* dlogits) {
  constexpr char kLoss[] = "SigmoidCrossEntropyFromLogits";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, logits, labels, batch, 1));
  PSTRAIN_RETURN_IF_ERROR(CheckBinaryLabels(kLoss, labels, batch));
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const double z = logits[i];
    const double y = labels[i];
    total += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
    if (dlogits != nullptr) dlogits[i] = static_cast<float>(Sigmoid(z) - y);
  }
  return total;
}

absl::StatusOr<double> BinaryCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, float* dprobs) {
  constexpr char kLoss[] = "BinaryCrossEntropyFromProbabilities";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, probs, labels, batch, 1));
  PSTRAIN_RETURN_IF_ERROR(CheckBinaryLabels(kLoss, labels, batch));
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const double c = std::clamp(probs[i], kLow, kHigh);
    const bool positive = labels[i] == 1;
    total -= positive ? std::log(c) : std::log(1.0 - c);
    if (dprobs == nullptr) continue;
    dprobs[i] = !InClipRange(probs[i]) ? 0.0f
                : positive             ? static_cast<float>(-1.0 / c)
                                       : static_cast<float>(1.0 / (1.0 - c));
  }
  return total;
}

absl::StatusOr<double> MeanAbsoluteErrorSum(const float* predictions,
                                            const float* targets, int64_t batch,
                                            int64_t outputs,
                                            float* dpredictions) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckArgs("MeanAbsoluteErrorSum", predictions, targets, batch, outputs));
  double total = 0;
  const int64_t n = batch * outputs;
  for (int64_t k = 0; k < n; ++k) {
    const double diff = static_cast<double>(predictions[k]) - targets[k];
    total += std::abs(diff);
    if (dpredictions != nullptr) {
      const double sign = diff > 0 ? 1.0 : diff < 0 ? -1.0 : 0.0;
      dpredictions[k] = static_cast<float>(sign / outputs);
    }
  }
  return total / outputs;
}

absl::StatusOr<double> HuberSum(const float* predictions, const float* targets,
                                int64_t batch, int64_t outputs, float delta,
                                float* dpredictions) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckArgs("HuberSum", predictions, targets, batch, outputs));
  if (!(delta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("HuberSum: delta must be > 0, got ", delta));
  }
  double total = 0;
  const int64_t n = batch * outputs;
  for (int64_t k = 0; k < n; ++k) {
    const double e = static_cast<double>(predictions[k]) - targets[k];
    const double abs_e = std::abs(e);
    const bool quadratic = abs_e <= delta;
    total += quadratic ? 0.5 * e * e : delta * abs_e - 0.5 * delta * delta;
    if (dpredictions != nullptr) {
      const double g = quadratic ? e : (e > 0 ? delta : -delta);
      dpredictions[k] = static_cast<float>(g / outputs);
    }
  }
  return total / outputs;
}

absl::StatusOr<int64_t> CountBinaryCorrect(const float* scores, bool logits,
                                           const int32_t* labels,
                                           int64_t batch) {
  constexpr char kMetric[] = "CountBinaryCorrect";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kMetric, scores, labels, batch, 1));
  PSTRAIN_RETURN_IF_ERROR(CheckBinaryLabels(kMetric, labels, batch));
  const float threshold = logits ? 0.0f : 0.5f;
  int64_t correct = 0;
  for (int64_t i = 0; i < batch; ++i) {
    if ((scores[i] > threshold ? 1 : 0) == labels[i]) ++correct;
  }
  return correct;
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

absl::Status LabelLoss::MakeTargets(const int32_t* labels, int64_t batch,
                                    bool one_output_is_value) {
  targets_.assign(batch * outputs_, 0.0f);
  for (int64_t i = 0; i < batch; ++i) {
    const int32_t label = labels[i];
    if (outputs_ == 1 && one_output_is_value) {
      targets_[i] = static_cast<float>(label);
    } else if (label >= 0 && label < outputs_) {
      targets_[i * outputs_ + label] = 1.0f;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(LossKindName(kind_), ": label ", label, " of example ",
                       i, " is outside [0, ", outputs_, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> LabelLoss::LossSum(const float* output,
                                          const int32_t* labels, int64_t batch,
                                          float* doutput) {
  switch (kind_) {
    case LossKind::kSparseCrossEntropy:
      return output_is_logits_ ? SparseSoftmaxCrossEntropyFromLogits(
                                     output, labels, batch, outputs_, doutput)
                               : SparseCrossEntropyFromProbabilities(
                                     output, labels, batch, outputs_, doutput);
    case LossKind::kCategoricalCrossEntropy:
      PSTRAIN_RETURN_IF_ERROR(
          MakeTargets(labels, batch, /*one_output_is_value=*/false));
      return output_is_logits_
                 ? SoftmaxCrossEntropyFromLogits(output, targets_.data(), batch,
                                                 outputs_, doutput)
                 : CategoricalCrossEntropyFromProbabilities(
                       output, targets_.data(), batch, outputs_, doutput);
    case LossKind::kBinaryCrossEntropy:
      if (outputs_ != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "binary_crossentropy takes one output unit per example, not ",
            outputs_));
      }
      return output_is_logits_
                 ? SigmoidCrossEntropyFromLogits(output, labels, batch, doutput)
                 : BinaryCrossEntropyFromProbabilities(output, labels, batch,
                                                       doutput);
    case LossKind::kMeanSquaredError:
      PSTRAIN_RETURN_IF_ERROR(
          MakeTargets(labels, batch, /*one_output_is_value=*/true));
      return MeanSquaredErrorSum(output, targets_.data(), batch, outputs_,
                                 doutput);
    case LossKind::kMeanAbsoluteError:
      PSTRAIN_RETURN_IF_ERROR(
          MakeTargets(labels, batch, /*one_output_is_value=*/true));
      return MeanAbsoluteErrorSum(output, targets_.data(), batch, outputs_,
                                  doutput);
    case LossKind::kHuber:
      PSTRAIN_RETURN_IF_ERROR(
          MakeTargets(labels, batch, /*one_output_is_value=*/true));
      return HuberSum(output, targets_.data(), batch, outputs_, kHuberDelta,
                      doutput);
  }
  return absl::InvalidArgumentError("LabelLoss: unknown loss");
}

absl::StatusOr<LabelLoss::Result> LabelLoss::Compute(const float* output,
                                                     const int32_t* labels,
                                                     int64_t batch,
                                                     float* doutput,
                                                     float* scores) {
  if (scores != nullptr && outputs_ != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "per-example scores need a model with one output unit, not ",
        outputs_));
  }
  Result result;
  PSTRAIN_ASSIGN_OR_RETURN(result.loss_sum,
                           LossSum(output, labels, batch, doutput));
  if (kind_ == LossKind::kBinaryCrossEntropy) {
    PSTRAIN_ASSIGN_OR_RETURN(
        result.correct,
        CountBinaryCorrect(output, output_is_logits_, labels, batch));
  } else if (outputs_ == 1) {
    for (int64_t i = 0; i < batch; ++i) {
      if (std::lround(output[i]) == labels[i]) ++result.correct;
    }
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(result.correct,
                             CountCorrect(output, labels, batch, outputs_));
  }
  if (scores != nullptr) std::copy(output, output + batch, scores);
  return result;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
