// Training losses, their gradients and accuracy counts on the GPU: the twin
// of worker/cpu/losses.h, with the same definitions and conventions (every
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
// One thread per example computes its loss in double (kernel_math.h, the
// same arithmetic as the CPU's); the host adds the examples' losses in order,
// so results match the CPU's to double rounding and are deterministic.
// Each call waits for the device's stream (it returns a number). Labels
// outside [0, classes) give INVALID_ARGUMENT naming the first such example;
// the gradient's contents are then unspecified. Not thread-safe; see Device.
#ifndef PSTRAIN_WORKER_GPU_LOSSES_H_
#define PSTRAIN_WORKER_GPU_LOSSES_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/device.h"

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
  // or INVALID_ARGUMENT if a label was bad (labels may be null: no check).
  absl::StatusOr<double> Finish(const char* loss, const int32_t* labels,
                                int64_t batch, int64_t classes);

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

#endif  // PSTRAIN_WORKER_GPU_LOSSES_H_
