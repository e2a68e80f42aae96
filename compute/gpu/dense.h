// Keras Dense forward and backward on cuBLAS: the GPU twin of
// compute/cpu/dense.h, on device pointers.
//
// The kernel keeps Keras's layout [in, out] (as the ps holds it). cuBLAS is
// column-major, and a row-major [r, c] matrix is, byte for byte, the
// column-major [c, r] matrix (its transpose), so every product is computed
// transposed, with no copy of any operand:
//   y  = x w       as  y^T [out, N]  = w^T [out, in] x^T [in, N]
//   dx = dy w^T    as  dx^T [in, N]  = (w^T)^T dy^T
//   dw = x^T dy    as  dw^T [out, in] = dy^T (x^T)^T
// then y += b and db = column sums of dy with pstrain's kernels (kernels.h).
// The handle computes in plain FP32 (the Device sets CUBLAS_DEFAULT_MATH,
// which does not use TF32 for sgemm).
//
//   DenseShape shape;
//   shape.batch = 32; shape.in = 784; shape.out = 128;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DenseOp> dense,
//                            DenseOp::Create(shape, device));
//   PSTRAIN_RETURN_IF_ERROR(dense->Forward(x, w, b, y));
//   PSTRAIN_RETURN_IF_ERROR(dense->Backward(x, w, dy, dx, dw, db));
//
// A Dense after Flatten reads the NHWC activation directly (cpu/window.h).
// All work is enqueued on the device's stream. Not thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_DENSE_H_
#define PSTRAIN_COMPUTE_GPU_DENSE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/gpu/device.h"

namespace pstrain {
namespace worker {
namespace gpu {

using ::pstrain::worker::cpu::DenseShape;

class DenseOp {
 public:
  // INVALID_ARGUMENT for a non-positive size, one beyond int range or a null
  // device.
  static absl::StatusOr<std::unique_ptr<DenseOp>> Create(
      const DenseShape& shape, Device* device);

  DenseOp(const DenseOp&) = delete;
  DenseOp& operator=(const DenseOp&) = delete;

  const DenseShape& shape() const { return shape_; }

  // y = x w + b. x [N, in], w [in, out], b [out] (null iff !use_bias),
  // y [N, out].
  absl::Status Forward(const float* x, const float* w, const float* b,
                       float* y);

  // dx (null iff !compute_dx; w may then be null too), dw and db (null iff
  // !use_bias), overwritten, from dy = dL/dy.
  absl::Status Backward(const float* x, const float* w, const float* dy,
                        float* dx, float* dw, float* db);

 private:
  DenseOp(const DenseShape& shape, Device* device)
      : shape_(shape), device_(device) {}

  const DenseShape shape_;
  Device* const device_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_DENSE_H_
