// Training losses, their gradients and accuracy counts on the GPU: the twin
// of compute/cpu/losses.h, with the same definitions and conventions (every
// loss is the SUM over the batch of the per-example loss, its gradient that
// of the sum; the caller divides by the global batch size). Inputs, labels
// and gradients are device pointers; the results come back to the host.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Losses> losses,
//                            Losses::Create(/*max_batch=*/256, device));
//   PSTRAIN_ASSIGN_OR_RETURN(double loss_sum,
//       losses->SparseSoftmaxCrossEntropyFromLogits(logits, labels, n, 10,
//                                                   dlogits));
//   PSTRAIN_ASSIGN_OR_RETURN(int64_t correct,
//       losses->CountCorrect(logits, labels, n, 10));
//
// One thread per example computes its loss in double (kernel_math.h and
// loss_math.h, the same arithmetic as the CPU's; kernels in kernels.cu and
// loss_kernels.cu); the host adds the examples' losses in order,
// so results match the CPU's to double rounding and are deterministic.
// Each call waits for the device's stream (it returns a number). Labels
// outside [0, classes) give INVALID_ARGUMENT naming the first such example;
// the gradient's contents are then unspecified. Not thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_LOSSES_H_
#define PSTRAIN_COMPUTE_GPU_LOSSES_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/gpu/device.h"

namespace pstrain {
namespace worker {
namespace gpu {

class Losses {
 public:
  // Scratch for batches of up to max_batch examples, allocated once.
  // INVALID_ARGUMENT unless max_batch > 0 and device is not null.
  static absl::StatusOr<std::unique_ptr<Losses>> Create(int64_t max_batch,
                                                        Device* device);

  Losses(const Losses&) = delete;
  Losses& operator=(const Losses&) = delete;
  ~Losses();

  int64_t max_batch() const { return max_batch_; }

  // As cpu::SparseSoftmaxCrossEntropyFromLogits. logits, dlogits:
  // [batch, classes]; labels: [batch] int32; dlogits may be null.
  absl::StatusOr<double> SparseSoftmaxCrossEntropyFromLogits(
      const float* logits, const int32_t* labels, int64_t batch,
      int64_t classes, float* dlogits);

  // As cpu::SparseCrossEntropyFromProbabilities (Keras's clipping to
  // [kKerasEpsilon, 1 - kKerasEpsilon]).
  absl::StatusOr<double> SparseCrossEntropyFromProbabilities(
      const float* probs, const int32_t* labels, int64_t batch, int64_t classes,
      float* dprobs);

  // As cpu::MeanSquaredErrorSum.
  absl::StatusOr<double> MeanSquaredErrorSum(const float* predictions,
                                             const float* targets,
                                             int64_t batch, int64_t outputs,
                                             float* dpredictions);

  // As cpu::CountCorrect.
  absl::StatusOr<int64_t> CountCorrect(const float* scores,
                                       const int32_t* labels, int64_t batch,
                                       int64_t classes);

  // The losses below follow compute/cpu/losses.h's of the same name (the
  // same definitions, Keras's clipping, gradients through the clip); their
  // per-example arithmetic is loss_math.h's. The binary ones take labels 0
  // or 1 and return INVALID_ARGUMENT naming the first other one.

  // Categorical cross-entropy from logits on target rows; logits, targets,
  // dlogits: [batch, classes].
  absl::StatusOr<double> SoftmaxCrossEntropyFromLogits(const float* logits,
                                                       const float* targets,
                                                       int64_t batch,
                                                       int64_t classes,
                                                       float* dlogits);

  // Categorical cross-entropy from probabilities (each row divided by its
  // sum, then clipped).
  absl::StatusOr<double> CategoricalCrossEntropyFromProbabilities(
      const float* probs, const float* targets, int64_t batch, int64_t classes,
      float* dprobs);

  // Binary cross-entropy on one logit per example; logits, dlogits, labels:
  // [batch].
  absl::StatusOr<double> SigmoidCrossEntropyFromLogits(const float* logits,
                                                       const int32_t* labels,
                                                       int64_t batch,
                                                       float* dlogits);

  // Binary cross-entropy on one probability per example (a sigmoid output).
  absl::StatusOr<double> BinaryCrossEntropyFromProbabilities(
      const float* probs, const int32_t* labels, int64_t batch, float* dprobs);

  // Mean absolute error summed over the batch.
  absl::StatusOr<double> MeanAbsoluteErrorSum(const float* predictions,
                                              const float* targets,
                                              int64_t batch, int64_t outputs,
                                              float* dpredictions);

  // Huber(delta) summed over the batch; INVALID_ARGUMENT unless delta > 0.
  absl::StatusOr<double> HuberSum(const float* predictions,
                                  const float* targets, int64_t batch,
                                  int64_t outputs, float delta,
                                  float* dpredictions);

  // Examples whose score (a logit when `logits`, else a probability) is on
  // the side of the threshold (0, or 0.5) that its label (0 or 1) names.
  absl::StatusOr<int64_t> CountBinaryCorrect(const float* scores, bool logits,
                                             const int32_t* labels,
                                             int64_t batch);

 private:
  Losses(int64_t max_batch, Device* device)
      : max_batch_(max_batch), device_(device) {}

  // INVALID_ARGUMENT for bad sizes or null inputs, as the CPU's checks.
  absl::Status CheckArgs(const char* loss, const void* input,
                         const void* second_input, int64_t batch,
                         int64_t classes) const;
  // Resets the bad-label marker before a kernel that checks labels.
  absl::Status ResetBadRow(const char* loss);
  // Waits for the kernel, then returns the sum of the batch's row results,
  // or INVALID_ARGUMENT if a label was bad (labels may be null: no check;
  // `binary`: the labels had to be 0 or 1).
  absl::StatusOr<double> Finish(const char* loss, const int32_t* labels,
                                int64_t batch, int64_t classes,
                                bool binary = false);

  const int64_t max_batch_;
  Device* const device_;
  DeviceBuffer row_out_;  // double [max_batch]
  DeviceBuffer bad_row_;  // unsigned long long
  // Pinned host copies of both, allocated with cudaMallocHost.
  double* host_rows_ = nullptr;
  unsigned long long* host_bad_row_ = nullptr;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_LOSSES_H_
