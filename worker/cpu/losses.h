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
// Sums are accumulated in double. Labels outside [0, classes) are
// INVALID_ARGUMENT (they come from data files).
#ifndef PSTRAIN_WORKER_CPU_LOSSES_H_
#define PSTRAIN_WORKER_CPU_LOSSES_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace pstrain {
namespace worker {
namespace cpu {

// Keras's backend epsilon, the clip of probabilities in cross-entropy.
inline constexpr float kKerasEpsilon = 1e-7f;

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

// Number of rows i whose argmax over scores[i, :] (the first maximum, as
// tf.argmax) equals labels[i]: Keras's sparse categorical accuracy times
// batch. Works on logits or probabilities alike.
absl::StatusOr<int64_t> CountCorrect(const float* scores, const int32_t* labels,
                                     int64_t batch, int64_t classes);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_CPU_LOSSES_H_
