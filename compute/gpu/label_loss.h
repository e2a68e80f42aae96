// A LossKind's loss and metric on a model's output against integer labels,
// on a GPU: the twin of cpu::LabelLoss (compute/cpu/losses.h), with the same
// definitions (targets, clipping, the metric of each loss), on
// gpu::Losses (losses.h). What GpuBackend computes for each GPU's slice.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LabelLoss> loss,
//       LabelLoss::Create(LossKind::kBinaryCrossEntropy,
//                         /*output_is_logits=*/true, /*outputs=*/1, device));
//   PSTRAIN_ASSIGN_OR_RETURN(LabelLoss::Result r,
//       loss->Compute(output, host_labels, device_labels, n,
//                     /*first_example=*/0, doutput));
//
// output and doutput are device pointers ([n, outputs]); the labels come
// both as the host copy (one-hot targets are made there) and the device
// copy. Labels outside the classes (or not 0/1 for binary cross-entropy)
// are INVALID_ARGUMENT naming the example (counted from first_example).
// Waits for the device's stream (it returns numbers). Not thread-safe; see
// Device.
#ifndef PSTRAIN_COMPUTE_GPU_LABEL_LOSS_H_
#define PSTRAIN_COMPUTE_GPU_LABEL_LOSS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/backend.h"
#include "compute/gpu/device.h"
#include "compute/gpu/losses.h"

namespace pstrain {
namespace worker {
namespace gpu {

class LabelLoss {
 public:
  struct Result {
    double loss_sum = 0;  // Sum over the examples of the per-example loss.
    int64_t correct = 0;
  };

  // INVALID_ARGUMENT unless outputs > 0 and device is not null.
  static absl::StatusOr<std::unique_ptr<LabelLoss>> Create(
      LossKind kind, bool output_is_logits, int64_t outputs, Device* device);

  LossKind kind() const { return kind_; }
  bool output_is_logits() const { return output_is_logits_; }

  // The loss of `n` examples, its gradient into doutput (null: none), and
  // the metric's count.
  absl::StatusOr<Result> Compute(const float* output,
                                 const int32_t* host_labels,
                                 const int32_t* device_labels, int64_t n,
                                 int64_t first_example, float* doutput);

 private:
  LabelLoss(LossKind kind, bool output_is_logits, int64_t outputs,
            Device* device)
      : kind_(kind),
        output_is_logits_(output_is_logits),
        outputs_(outputs),
        device_(device) {}

  absl::StatusOr<double> LossSum(const float* output,
                                 const int32_t* host_labels,
                                 const int32_t* device_labels, int64_t n,
                                 int64_t first_example, float* doutput);
  // targets_ = the labels' one-hot rows (or the labels themselves for one
  // output and `one_output_is_value`), on the device.
  absl::Status UploadTargets(const int32_t* labels, int64_t n,
                             int64_t first_example, bool one_output_is_value);
  absl::StatusOr<int64_t> CountCorrect(const float* output,
                                       const int32_t* host_labels,
                                       const int32_t* device_labels,
                                       int64_t n);
  // Grows losses_ and the buffers to n examples.
  absl::Status Reserve(int64_t n);

  const LossKind kind_;
  const bool output_is_logits_;
  const int64_t outputs_;
  Device* const device_;
  std::unique_ptr<Losses> losses_;
  DeviceBuffer targets_;  // [n, outputs_]
  std::vector<float> host_targets_;
  std::vector<float> host_outputs_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_LABEL_LOSS_H_
