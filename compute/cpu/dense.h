// Keras Dense forward and backward on oneDNN matmul.
//
// The kernel keeps Keras's layout [in, out] (as the ps holds it), so no
// transpose or reorder of the weights happens anywhere:
//   y  = x w + b        x [N, in], w [in, out], b [out], y [N, out]
//   dx = dy w^T         (w read as an [out, in] matrix through strides)
//   dw = x^T dy         (x read as an [in, N] matrix through strides)
//   db = sum over rows of dy
//
//   DenseShape shape;
//   shape.batch = 32; shape.in = 784; shape.out = 128;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DenseOp> dense,
//                            DenseOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(dense->Forward(x, w, b, y));
//   PSTRAIN_RETURN_IF_ERROR(dense->Backward(x, w, dy, dx, dw, db));
//
// A Dense after Flatten reads the NHWC activation directly (see window.h).
//
// With shape.bf16 the three matmuls read bf16 copies (bf16_copy.h) of x, w
// and dy and write float32: Forward converts x and w; the Backward that
// follows reuses those copies when it gets the same x and w pointers
// (REQUIRES: their values unchanged since that Forward, as within a training
// step) and converts dy once for both of its matmuls.
// Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_DENSE_H_
#define PSTRAIN_COMPUTE_CPU_DENSE_H_

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/bf16_copy.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

class DenseOp {
 public:
  // INVALID_ARGUMENT for a non-positive size; a oneDNN failure as a status
  // naming Dense.
  static absl::StatusOr<std::unique_ptr<DenseOp>> Create(
      const DenseShape& shape, Engine* engine);

  DenseOp(const DenseOp&) = delete;
  DenseOp& operator=(const DenseOp&) = delete;

  const DenseShape& shape() const { return shape_; }

  // bf16 conversions run so far (x, w and dy together; for tests).
  int64_t bf16_conversions() const {
    return x_bf16_.conversions() + w_bf16_.conversions() +
           dy_bf16_.conversions();
  }

  // y = x w + b. b is null iff !use_bias.
  absl::Status Forward(const float* x, const float* w, const float* b,
                       float* y);

  // dx (null iff !compute_dx; w may then be null too), dw and db (null iff
  // !use_bias), overwritten, from dy = dL/dy.
  absl::Status Backward(const float* x, const float* w, const float* dy,
                        float* dx, float* dw, float* db);

 private:
  DenseOp(const DenseShape& shape, Engine* engine)
      : shape_(shape), engine_(engine) {}

  absl::Status Init();

  const DenseShape shape_;
  Engine* const engine_;

  // x as [N, in] and as [in, N]; w as [in, out] and as [out, in].
  dnnl::memory x_mem_, xt_mem_, w_mem_, wt_mem_, b_mem_, y_mem_;
  dnnl::memory dy_mem_, dx_mem_, dw_mem_;

  // shape_.bf16: the bf16 copies the matmuls read instead of x, w and dy.
  Bf16Copy x_bf16_, w_bf16_, dy_bf16_;

  dnnl::matmul fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  dnnl::matmul bwd_data_;
  std::unordered_map<int, dnnl::memory> bwd_data_args_;
  dnnl::matmul bwd_weights_;
  std::unordered_map<int, dnnl::memory> bwd_weights_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_DENSE_H_
