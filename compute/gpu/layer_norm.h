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
#include "compute/cpu/op_shapes.h"
#include "compute/gpu/device.h"

namespace pstrain {
namespace worker {
namespace gpu {

using ::pstrain::worker::cpu::LayerNormShape;

class LayerNormOp {
 public:
  // INVALID_ARGUMENT for a non-positive size, more than INT32_MAX elements,
  // an epsilon that is negative or not finite, or a null device;
  // RESOURCE_EXHAUSTED when the statistics' buffers do not fit.
  static absl::StatusOr<std::unique_ptr<LayerNormOp>> Create(
      const LayerNormShape& shape, Device* device);

  LayerNormOp(const LayerNormOp&) = delete;
  LayerNormOp& operator=(const LayerNormOp&) = delete;

  const LayerNormShape& shape() const { return shape_; }

  // y = gamma * xhat + beta, x and y [rows, width]; gamma [width] is null
  // iff !scale, beta [width] null iff !center. Records each row's mean and
  // variance for Backward.
  absl::Status Forward(const float* x, const float* gamma, const float* beta,
                       float* y);

  // From dy = dL/dy, overwrites dx [rows, width] (may be null: not
  // computed), dgamma [width] (null iff !scale) and dbeta [width] (null iff
  // !center). x must be the last Forward's input; gamma is null iff !scale.
  // FAILED_PRECONDITION before any Forward.
  absl::Status Backward(const float* x, const float* gamma, const float* dy,
                        float* dx, float* dgamma, float* dbeta);

  // The last Forward's per-row statistics, device pointers to [rows].
  const float* mean() const { return mean_.floats(); }
  const float* variance() const { return variance_.floats(); }

 private:
  LayerNormOp(const LayerNormShape& shape, Device* device)
      : shape_(shape), device_(device) {}

  const LayerNormShape shape_;
  Device* const device_;
  bool has_forward_ = false;

  DeviceBuffer mean_, variance_;  // float [rows]
  DeviceBuffer scratch_;          // double, for dgamma's and dbeta's sums.
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_LAYER_NORM_H_
