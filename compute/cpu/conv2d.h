// Keras Conv2D (channels_last) forward and backward on oneDNN.
//
// Activations are NHWC float32 [N, H, W, C]; the kernel is HWIO
// [kh, kw, in / groups, out] exactly as Keras stores it (and the ps holds
// it); the bias is [out]. Dilation (Keras's dilation_rate), groups
// (DepthwiseConv2D: groups = in) and causal padding (Conv1D, as height 1)
// are oneDNN's dilates, grouped weights and left-only padding. Create once per
// shape, then call Forward and Backward every step:
//
//   Conv2DShape shape;
//   shape.batch = 32; shape.height = 28; shape.width = 28;
//   shape.in_channels = 1; shape.out_channels = 32;
//   shape.kernel_h = shape.kernel_w = 3; shape.padding = Padding::kSame;
//   shape.compute_dx = false;  // First layer: no gradient for the input.
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Conv2DOp> conv,
//                            Conv2DOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(conv->Forward(x, w, step, b, y));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(conv->Backward(x, w, step, dy, nullptr, dw, db));
//
// The kernel is described to oneDNN as HWIO memory and used in place when
// oneDNN's chosen implementation reads that layout. When it prefers a blocked
// layout, the op reorders the kernel into a buffer it owns and reuses that
// copy for as long as the caller passes the same kernel pointer and
// `weights_step` (the training step whose values the kernel holds), so the
// reorder costs once per step, not once per call. REQUIRES: the caller passes
// a new `weights_step` (or pointer) whenever it changes the kernel's values.
//
// With shape.bf16 (mixed precision) the cached kernel copy is bf16 (the
// reorder converts as it relayouts, once per weights_step), Forward converts
// x to a bf16 copy (bf16_copy.h) that the following Backward reuses when it
// gets the same x pointer (REQUIRES: x unchanged since, as within a training
// step), and Backward converts dy once for both of its primitives. y, dx, dw
// and db are float32, accumulated in float32 by oneDNN.
//
// Primitives, memory descriptors and scratch buffers are all made in Create.
// Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_CONV2D_H_
#define PSTRAIN_COMPUTE_CPU_CONV2D_H_

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/conv2d_geometry.h"
#include "compute/cpu/bf16_copy.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/weights_cache.h"
#include "compute/cpu/window.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

class Conv2DOp : public Conv2DOpGeometry {
 public:
  // INVALID_ARGUMENT for a non-positive size or a kernel larger than a valid
  // input; a oneDNN failure as a status naming Conv2D.
  static absl::StatusOr<std::unique_ptr<Conv2DOp>> Create(
      const Conv2DShape& shape, Engine* engine);

  // y = conv(x, w) + b, or max(that, 0) with fuse_relu.
  // x: [N, H, W, in]; w: [kh, kw, in, out]; b: [out], null iff !use_bias;
  // y: [N, out_height, out_width, out].
  absl::Status Forward(const float* x, const float* w, uint64_t weights_step,
                       const float* b, float* y);

  // Gradients of a loss given dy = dL/dy: dx (null iff !compute_dx), dw and
  // db (null iff !use_bias), each overwritten, in the layouts of x, w and b.
  // w may be null when !compute_dx.
  absl::Status Backward(const float* x, const float* w, uint64_t weights_step,
                        const float* dy, float* dx, float* dw, float* db);

  // Whether oneDNN computes with a kernel layout other than HWIO, and how
  // many kernel reorders have run so far (for tests and benchmarks).
  bool reorders_weights() const { return fwd_weights_.reorders(); }
  int64_t weight_reorder_count() const {
    return fwd_weights_.reorder_count() + bwd_data_weights_.reorder_count();
  }
  // With shape.bf16: conversions of x and dy to bf16 so far.
  int64_t bf16_conversions() const {
    return x_bf16_.conversions() + dy_bf16_.conversions();
  }

 private:
  Conv2DOp(const Conv2DShape& shape, Engine* engine, const Conv2DWindows& out)
      : Conv2DOpGeometry(shape, out), engine_(engine) {}

  absl::Status Init();

  Engine* const engine_;

  WeightsCache& bwd_data_cache() {
    return bwd_data_shares_weights_ ? fwd_weights_ : bwd_data_weights_;
  }

  // Memory objects over the caller's buffers; their handles are set per call
  // and the argument maps below refer to them.
  dnnl::memory x_mem_, y_mem_, b_mem_, dy_mem_, dx_mem_, dw_mem_, db_mem_;

  // shape_.bf16: the bf16 copies the primitives read instead of x and dy.
  Bf16Copy x_bf16_, dy_bf16_;

  dnnl::convolution_forward fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  WeightsCache fwd_weights_;

  dnnl::convolution_backward_data bwd_data_;
  std::unordered_map<int, dnnl::memory> bwd_data_args_;
  bool bwd_data_shares_weights_ = false;
  WeightsCache bwd_data_weights_;

  dnnl::convolution_backward_weights bwd_weights_;
  std::unordered_map<int, dnnl::memory> bwd_weights_args_;
  // When oneDNN writes dw in a layout other than HWIO it writes into its own
  // buffer, which a reorder copies into the caller's dw.
  bool dw_reorder_needed_ = false;
  dnnl::reorder dw_reorder_;
  std::unordered_map<int, dnnl::memory> dw_reorder_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_CONV2D_H_
