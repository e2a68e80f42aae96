// Training losses and their gradients, and accuracy counts, for a batch.
//
// Every loss returns the SUM over the batch's examples of the per-example
// loss, and (when the gradient pointer is not null) overwrites it with the
// gradient of that sum. The caller divides both by the global batch size (all
// workers' examples of the step), which is what makes the pushed gradients of
// several workers add up to the gradient of Keras's mean loss.
//
//   PSTRAIN_ASSIGN_OR_RETURN(double loss_sum,
//       SparseSoftmaxCrossEntropyFromLogits(logits, labels, n, 10, dlogits));
//   PSTRAIN_ASSIGN_OR_RETURN(int64_t correct,
//       CountCorrect(logits, labels, n, 10));
//
// Sums are accumulated in double. Labels outside [0, classes) (for the
// binary losses, other than 0 and 1) are INVALID_ARGUMENT: they come from
// data files. LabelLoss at the end puts them together: the loss a backend
// computes for a LossKind (compute/backend.h) against integer labels.
//
// Where a loss clips (probabilities to [eps, 1 - eps]), its gradient is 0
// wherever the value was clipped, as through tf.clip_by_value (which passes
// the gradient where low <= p <= high).
#ifndef PSTRAIN_COMPUTE_CPU_LOSSES_H_
#define PSTRAIN_COMPUTE_CPU_LOSSES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/backend.h"

namespace pstrain {
namespace worker {
namespace cpu {

// Keras's backend epsilon, the clip of probabilities in cross-entropy.
inline constexpr float kKerasEpsilon = 1e-7f;
// Keras's Huber loss default delta.
inline constexpr float kHuberDelta = 1.0f;

// Sum over i of -log(softmax(logits[i, :])[labels[i]]), computed stably
// (log-sum-exp); dlogits = softmax(logits) - onehot(labels).
// logits, dlogits: [batch, classes]; labels: [batch].
absl::StatusOr<double> SparseSoftmaxCrossEntropyFromLogits(
    const float* logits, const int32_t* labels, int64_t batch, int64_t classes,
    float* dlogits);

// Keras SparseCategoricalCrossentropy(from_logits=False) summed over the
// batch. As Keras does, probabilities are clipped to [eps, 1 - eps]
// (eps = kKerasEpsilon), their logs taken as logits and softmax cross-entropy
// applied, so each example's loss is -log(c[label] / sum_j c[j]) with c the
// clipped row (for rows summing to 1 and no clipping: -log p[label]).
// dprobs is the gradient of that sum: 1 / sum_j c[j] - [j == label] / c[j]
// where p[j] lies within the clip range, 0 where it was clipped.
absl::StatusOr<double> SparseCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, int64_t classes,
    float* dprobs);

// Keras MeanSquaredError summed over the batch: sum over i of
// mean_j (predictions[i, j] - targets[i, j])^2, the mean over the last axis;
// dpredictions = 2 (predictions - targets) / outputs.
// predictions, targets, dpredictions: [batch, outputs].
absl::StatusOr<double> MeanSquaredErrorSum(const float* predictions,
                                           const float* targets, int64_t batch,
                                           int64_t outputs,
                                           float* dpredictions);

// Keras CategoricalCrossentropy(from_logits=True) summed over the batch:
// sum over i of -sum_j targets[i, j] * log(softmax(logits[i, :])[j]),
// computed stably; dlogits = softmax(logits) * sum_j targets[i, j] - targets.
// On one-hot targets, SparseSoftmaxCrossEntropyFromLogits of their labels.
// logits, targets, dlogits: [batch, classes].
absl::StatusOr<double> SoftmaxCrossEntropyFromLogits(const float* logits,
                                                     const float* targets,
                                                     int64_t batch,
                                                     int64_t classes,
                                                     float* dlogits);

// Keras CategoricalCrossentropy(from_logits=False) summed over the batch.
// As Keras does, each row is divided by its sum, then clipped to
// [eps, 1 - eps]: the loss is -sum_j t[j] * log(clip(p[j] / sum_k p[k])).
// (Keras's sparse loss clips first and renormalizes after, see
// SparseCrossEntropyFromProbabilities: the two differ where they clip.)
absl::StatusOr<double> CategoricalCrossEntropyFromProbabilities(
    const float* probs, const float* targets, int64_t batch, int64_t classes,
    float* dprobs);

// Keras BinaryCrossentropy(from_logits=True) on one logit per example, summed
// over the batch: max(z, 0) - z * y + log(1 + exp(-|z|)); dlogits =
// sigmoid(z) - y. labels: [batch], each 0 or 1.
absl::StatusOr<double> SigmoidCrossEntropyFromLogits(const float* logits,
                                                     const int32_t* labels,
                                                     int64_t batch,
                                                     float* dlogits);

// Keras BinaryCrossentropy(from_logits=False) on one probability per
// example, summed over the batch: with c = clip(p, eps, 1 - eps),
// -(y * log(c) + (1 - y) * log(1 - c)), as Keras 3 computes it (tf.keras 2
// also added eps inside both logs). labels: [batch], each 0 or 1.
absl::StatusOr<double> BinaryCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, float* dprobs);

// Keras MeanAbsoluteError summed over the batch: sum over i of
// mean_j |predictions[i, j] - targets[i, j]|; dpredictions =
// sign(predictions - targets) / outputs (0 where they are equal, as tf.abs's
// gradient).
absl::StatusOr<double> MeanAbsoluteErrorSum(const float* predictions,
                                            const float* targets, int64_t batch,
                                            int64_t outputs,
                                            float* dpredictions);

// Keras Huber(delta) summed over the batch: sum over i of mean_j h(e[i, j]),
// e = predictions - targets, h(e) = e^2 / 2 where |e| <= delta, else
// delta * |e| - delta^2 / 2; dpredictions = h'(e) / outputs, h'(e) = e or
// delta * sign(e). delta > 0.
absl::StatusOr<double> HuberSum(const float* predictions, const float* targets,
                                int64_t batch, int64_t outputs, float delta,
                                float* dpredictions);

// Number of examples i whose predicted class, 1 when the probability
// exceeds 0.5 (Keras's binary_accuracy threshold) else 0, equals labels[i]
// (each 0 or 1). scores: [batch], logits (`logits`: the probability exceeds
// 0.5 exactly when the logit exceeds 0) or probabilities.
absl::StatusOr<int64_t> CountBinaryCorrect(const float* scores, bool logits,
                                           const int32_t* labels,
                                           int64_t batch);

// Number of rows i whose argmax over scores[i, :] (the first maximum, as
// tf.argmax) equals labels[i]: Keras's sparse categorical accuracy times
// batch. Works on logits or probabilities alike.
absl::StatusOr<int64_t> CountCorrect(const float* scores, const int32_t* labels,
                                     int64_t batch, int64_t classes);

// A LossKind's loss and metric on a model's output against integer labels:
// what the CPU backend computes for each batch.
//
//   LabelLoss loss(LossKind::kBinaryCrossEntropy, /*output_is_logits=*/true,
//                  /*outputs=*/1);
//   PSTRAIN_ASSIGN_OR_RETURN(LabelLoss::Result r,
//       loss.Compute(output, labels, batch, doutput, /*scores=*/nullptr));
//
// The cross-entropies read the output as logits (`output_is_logits`) or as
// probabilities, clipped as Keras does. Their targets: the label (sparse),
// its one-hot row (categorical), the label itself, 0 or 1 (binary). mse, mae
// and huber compare the output with the label's one-hot row, or with the
// label itself for a one-unit output. The metric (Result::correct): argmax
// equals the label; for binary cross-entropy, Keras's binary accuracy; for
// the other losses on a one-unit output, the output rounded equals the
// label. Not thread-safe (a scratch buffer is reused).
class LabelLoss {
 public:
  struct Result {
    double loss_sum = 0;  // Sum over the batch of the per-example loss.
    int64_t correct = 0;
  };

  // REQUIRES: outputs > 0.
  LabelLoss(LossKind kind, bool output_is_logits, int64_t outputs)
      : kind_(kind), output_is_logits_(output_is_logits), outputs_(outputs) {}

  LossKind kind() const { return kind_; }
  // Whether the cross-entropies read the output as logits.
  bool output_is_logits() const { return output_is_logits_; }

  // output, doutput: [batch, outputs]; labels, scores: [batch]. doutput
  // (when not null) is overwritten with the gradient of loss_sum; scores
  // (when not null; INVALID_ARGUMENT unless outputs == 1) receives the
  // output of each example.
  absl::StatusOr<Result> Compute(const float* output, const int32_t* labels,
                                 int64_t batch, float* doutput, float* scores);

 private:
  // The loss's sum over the batch, and its gradient into doutput.
  absl::StatusOr<double> LossSum(const float* output, const int32_t* labels,
                                 int64_t batch, float* doutput);
  // targets_ = one-hot rows of the labels (or the labels, for one output
  // and `one_output_is_value`).
  absl::Status MakeTargets(const int32_t* labels, int64_t batch,
                           bool one_output_is_value);

  const LossKind kind_;
  const bool output_is_logits_;
  const int64_t outputs_;
  std::vector<float> targets_;  // [batch, outputs_]
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_LOSSES_H_
