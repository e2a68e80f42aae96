// Keras LayerNormalization over the last axis on the GPU: the twin of
// compute/cpu/layer_norm.h (same shape struct, formulas and Forward/Backward
// contract), on device pointers.
//
// x is any activation viewed as [rows, width]; each row is normalized with
// its own mean and biased variance, then scaled by gamma and shifted by beta
// (see cpu/layer_norm.h for the formulas of y, dx, dgamma and dbeta).
//
//   LayerNormShape shape;
//   shape.rows = batch * steps; shape.width = 64;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LayerNormOp> norm,
//                            LayerNormOp::Create(shape, device));
//   PSTRAIN_RETURN_IF_ERROR(norm->Forward(x, gamma, beta, y));
//   PSTRAIN_RETURN_IF_ERROR(norm->Backward(x, gamma, dy, dx, dgamma, dbeta));
//
// What runs: pstrain's own kernels (norm_attention_kernels.h). Forward and
// dx run one thread block per row, summing the row in double (two passes for
// the statistics, as the CPU's); dgamma and dbeta are column sums over the
// rows in double, in a fixed order (deterministic, no atomics). Forward
// keeps each row's mean and variance (float) in device buffers allocated in
// Create; Backward reuses them, so it must be given the x of the last
// Forward. All work is enqueued on the device's stream. Not thread-safe; see
// Device.
#ifndef PSTRAIN_COMPUTE_GPU_LAYER_NORM_H_
#define PSTRAIN_COMPUTE_GPU_LAYER_NORM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/gpu/device.h"
#include "compute/layer_norm_base.h"

namespace pstrain {
namespace worker {
namespace gpu {

// The public methods, their checks and their contract are LayerNormBase's
// (compute/layer_norm_base.h); this is the CUDA half.
class LayerNormOp : public LayerNormBase {
 public:
  // INVALID_ARGUMENT for a non-positive size, more than INT32_MAX elements,
  // an epsilon that is negative or not finite, or a null device;
  // RESOURCE_EXHAUSTED when the statistics' buffers do not fit.
  static absl::StatusOr<std::unique_ptr<LayerNormOp>> Create(
      const LayerNormShape& shape, Device* device);

  // The last Forward's per-row statistics, device pointers to [rows].
  const float* mean() const { return mean_.floats(); }
  const float* variance() const { return variance_.floats(); }

 private:
  LayerNormOp(const LayerNormShape& shape, Device* device)
      : LayerNormBase(shape), device_(device) {}

  absl::Status RunForward(const float* x, const float* gamma, const float* beta,
                          float* y) override;
  absl::Status RunBackward(const float* x, const float* gamma, const float* dy,
                           float* dx, float* dgamma, float* dbeta) override;

  Device* const device_;

  DeviceBuffer mean_, variance_;  // float [rows]
  DeviceBuffer scratch_;          // double, for dgamma's and dbeta's sums.
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_LAYER_NORM_H_
