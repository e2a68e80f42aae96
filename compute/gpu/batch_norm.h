// Keras BatchNormalization over the last axis on the GPU: the twin of
// compute/cpu/batch_norm.h (same shape struct, formulas, modes and
// Forward/Backward contract), on device pointers.
//
// x is any channels-last activation viewed as [rows, channels]. Training
// normalizes with the batch's own statistics (biased variance, as Keras)
// and hands them out as batch_mean and batch_var; inference uses the given
// moving statistics; Backward is the exact gradient of a training Forward
// through the batch statistics (see cpu/batch_norm.h for the formulas).
//
//   BatchNormShape shape;
//   shape.rows = batch * height * width; shape.channels = 32;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchNormOp> norm,
//                            BatchNormOp::Create(shape, device));
//   PSTRAIN_RETURN_IF_ERROR(
//       norm->ForwardTraining(x, gamma, beta, y, batch_mean, batch_var));
//   PSTRAIN_RETURN_IF_ERROR(norm->Backward(x, gamma, dy, dx, dgamma, dbeta));
//   // The moving statistics' "gradients" the ps folds in: the batch's
//   // statistics times the batch size (as cpu::GraphStage hands them on).
//   PSTRAIN_RETURN_IF_ERROR(
//       norm->ScaledStatistics(batch, dmoving_mean, dmoving_var));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(norm->ForwardInference(
//       x, gamma, beta, moving_mean, moving_var, y));
//
// What runs: pstrain's own kernels (norm_attention_kernels.h), not cuDNN's
// batch-norm API. cuDNN sums the statistics in float32 and its backward
// takes 1 / sqrt(var + epsilon) from its own forward; the CPU op sums in
// double (two passes: the mean, then the squared deviations) precisely
// because float32 sums drift at rows = batch * 28 * 28 (cpu/batch_norm.h),
// and these kernels do the same, deterministically (fixed summation order,
// no atomics). The normalization and dx are per-element float32 arithmetic
// as oneDNN's.
//
// The op keeps the last training Forward's statistics in device buffers
// allocated in Create; Backward reuses them, so it must be given that
// Forward's x. All work is enqueued on the device's stream; nothing waits
// for it. Not thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_BATCH_NORM_H_
#define PSTRAIN_COMPUTE_GPU_BATCH_NORM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/batch_norm_base.h"
#include "compute/gpu/device.h"

namespace pstrain {
namespace worker {
namespace gpu {

// The public methods, their checks and their contract are BatchNormBase's
// (compute/batch_norm_base.h); this is the CUDA half.
class BatchNormOp : public BatchNormBase {
 public:
  // INVALID_ARGUMENT for a non-positive size, more than INT32_MAX elements,
  // an epsilon that is negative or not finite, or a null device;
  // RESOURCE_EXHAUSTED when the statistics' buffers do not fit.
  static absl::StatusOr<std::unique_ptr<BatchNormOp>> Create(
      const BatchNormShape& shape, Device* device);

  // mean_out = batch_mean * scale and var_out = batch_var * scale
  // ([channels] each, float32 products as the CPU stage's) from the last
  // ForwardTraining; either may be null. FAILED_PRECONDITION before any.
  absl::Status ScaledStatistics(float scale, float* mean_out, float* var_out);

  // The last ForwardTraining's statistics, device pointers to [channels].
  const float* batch_mean() const { return mean_.floats(); }
  const float* batch_var() const { return variance_.floats(); }

 private:
  BatchNormOp(const BatchNormShape& shape, Device* device)
      : BatchNormBase(shape), device_(device) {}

  absl::Status RunForwardTraining(const Buffers& b) override;
  absl::Status RunForwardInference(const Buffers& b) override;
  absl::Status RunBackward(const Buffers& b) override;

  Device* const device_;

  DeviceBuffer mean_, variance_;  // float [channels], the last training's.
  DeviceBuffer scratch_;          // double, for the kernels' column sums.
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_BATCH_NORM_H_
