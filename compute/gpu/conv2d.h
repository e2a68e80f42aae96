// Keras Conv2D (channels_last) forward and backward on cuDNN: the GPU twin
// of compute/cpu/conv2d.h, with the same shapes, layouts and contracts, and
// device pointers everywhere.
//
// Activations are NHWC float32 [N, H, W, C]; the kernel is HWIO
// [kh, kw, in / groups, out] as Keras stores it (and the ps holds it); the
// bias is [out]. Dilation and groups (DepthwiseConv2D) are cuDNN's
// (cudnnSetConvolution2dDescriptor, cudnnSetConvolutionGroupCount). Create once
// per shape, then call Forward and Backward every step:
//
//   Conv2DShape shape;
//   shape.batch = 32; shape.height = 28; shape.width = 28;
//   shape.in_channels = 1; shape.out_channels = 32;
//   shape.kernel_h = shape.kernel_w = 3; shape.padding = Padding::kSame;
//   shape.compute_dx = false;  // First layer: no gradient for the input.
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Conv2DOp> conv,
//                            Conv2DOp::Create(shape, device));
//   PSTRAIN_RETURN_IF_ERROR(conv->Forward(x, w, step, b, y));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(conv->Backward(x, w, step, dy, nullptr, dw, db));
//
// How it maps onto cuDNN:
// - Kernel layout. cuDNN's filter format for NHWC tensors is KRSC
//   [out, kh, kw, in], the transpose of HWIO seen as the matrix
//   [kh * kw * in, out]. Forward and backward-data read a KRSC copy that a
//   small kernel makes; the copy is reused while the caller passes the same
//   kernel pointer and `weights_step`, so it costs once per step.
//   REQUIRES: a new `weights_step` (or pointer) whenever the kernel's values
//   change. Backward-filter writes KRSC into the op's buffer and a kernel
//   transposes it into the caller's HWIO dw.
// - Padding. cuDNN pads symmetrically; Keras "same" pads total / 2 before
//   and the rest after, one more after when the total is odd (e.g. stride 2,
//   kernel 3, even input: 0 before, 1 after). Then the op copies the input
//   into a buffer one row and/or column larger (zeros at the bottom/right)
//   and lets cuDNN pad pad_before on both sides, as TensorFlow does; dx is
//   computed in that layout and cropped. Symmetric cases use cuDNN directly.
//   Conv1D's "causal" (all the padding before) is the same scheme: the
//   input copied below extent - 1 zero columns, cuDNN padding nothing.
// - Algorithms are chosen once, in Create, by cuDNN's heuristics
//   (cudnnGet*_v7): the first that is deterministic, uses plain FP32 FMA math
//   (no TF32, so results match the CPU to float32 accuracy) and fits in the
//   device's workspace; failing a deterministic one, the first
//   non-deterministic one. The workspace is the Device's, allocated once.
// - Bias add and bias gradient are pstrain kernels (kernels.h), shared with
//   Dense; the bias gradient is deterministic.
//
// All work is enqueued on the device's stream; nothing waits. Not
// thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_CONV2D_H_
#define PSTRAIN_COMPUTE_GPU_CONV2D_H_

#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/conv2d_geometry.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/window.h"
#include "compute/gpu/cudnn_util.h"
#include "compute/gpu/device.h"
#include "compute/gpu/kernel_math.h"

namespace pstrain {
namespace worker {
namespace gpu {

using ::pstrain::worker::cpu::Padding;
using ::pstrain::worker::cpu::Window;

using ::pstrain::worker::cpu::Conv2DShape;

class Conv2DOp : public Conv2DOpGeometry {
 public:
  // INVALID_ARGUMENT for a non-positive size, a kernel larger than a valid
  // input or a null device; a CUDA or cuDNN failure as a status naming
  // Conv2D and the call.
  static absl::StatusOr<std::unique_ptr<Conv2DOp>> Create(
      const Conv2DShape& shape, Device* device);

  // y = conv(x, w) + b.
  // x: [N, H, W, in]; w: [kh, kw, in, out]; b: [out], null iff !use_bias;
  // y: [N, out_height, out_width, out].
  absl::Status Forward(const float* x, const float* w, uint64_t weights_step,
                       const float* b, float* y);

  // Gradients of a loss given dy = dL/dy: dx (null iff !compute_dx), dw and
  // db (null iff !use_bias), each overwritten, in the layouts of x, w and b.
  // w may be null when !compute_dx.
  absl::Status Backward(const float* x, const float* w, uint64_t weights_step,
                        const float* dy, float* dx, float* dw, float* db);

  // Whether the input is copied into a padded buffer (asymmetric "same").
  bool pads_input() const { return pads_input_; }
  // HWIO -> KRSC kernel transposes run so far (for tests).
  int64_t weight_transpose_count() const { return weight_transpose_count_; }
  // The algorithms chosen in Create (for logs and tests).
  cudnnConvolutionFwdAlgo_t forward_algorithm() const { return fwd_algo_; }
  cudnnConvolutionBwdDataAlgo_t backward_data_algorithm() const {
    return bwd_data_algo_;
  }
  cudnnConvolutionBwdFilterAlgo_t backward_filter_algorithm() const {
    return bwd_filter_algo_;
  }

 private:
  Conv2DOp(const Conv2DShape& shape, Device* device, const Conv2DWindows& out);

  absl::Status Init();
  absl::Status ChooseAlgorithms();
  // Makes w_krsc_ hold the KRSC transpose of `w` for `weights_step`.
  absl::Status PrepareWeights(const float* w, uint64_t weights_step);
  // x_padded_ (dx_padded_) as the pad (crop) kernels see it.
  PadGeometry InputPadding() const;
  // The input cuDNN reads: x itself, or x copied into x_padded_.
  absl::StatusOr<const float*> Input(const float* x);

  Device* const device_;
  // The input as cuDNN sees it: extra_h_ / extra_w_ zero rows / columns
  // added where Keras pads one side more than the other ("same": one after;
  // "causal": all before, extra_top_ / extra_left_ of them), and cuDNN's
  // own symmetric padding pad_h_ / pad_w_.
  const int64_t extra_top_;
  const int64_t extra_left_;
  const int64_t extra_h_;
  const int64_t extra_w_;
  const int64_t pad_h_;
  const int64_t pad_w_;
  const bool pads_input_;

  TensorDescriptor x_desc_;  // [N, H + extra_h_, W + extra_w_, in]
  TensorDescriptor y_desc_;  // [N, out_height, out_width, out]
  FilterDescriptor w_desc_;  // KRSC
  ConvolutionDescriptor conv_desc_;

  cudnnConvolutionFwdAlgo_t fwd_algo_ =
      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_ =
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_ =
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  size_t fwd_workspace_ = 0;
  size_t bwd_data_workspace_ = 0;
  size_t bwd_filter_workspace_ = 0;

  DeviceBuffer w_krsc_;     // The cached KRSC kernel.
  DeviceBuffer dw_krsc_;    // Backward-filter's KRSC output.
  DeviceBuffer x_padded_;   // Only when pads_input_.
  DeviceBuffer dx_padded_;  // Only when pads_input_ && compute_dx.

  bool w_krsc_valid_ = false;
  const float* w_krsc_source_ = nullptr;
  uint64_t w_krsc_step_ = 0;
  int64_t weight_transpose_count_ = 0;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_CONV2D_H_
