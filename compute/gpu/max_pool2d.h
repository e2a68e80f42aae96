// Keras MaxPool2D (channels_last) forward and backward on cuDNN pooling: the
// GPU twin of compute/cpu/max_pool2d.h, on device pointers.
//
//   Pool2DShape shape;
//   shape.batch = 32; shape.height = 28; shape.width = 28; shape.channels = 32;
//   shape.pool_h = shape.pool_w = 2;
//   shape.stride_h = shape.stride_w = 2;  // Keras: strides default to pool.
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<MaxPool2DOp> pool,
//                            MaxPool2DOp::Create(shape, device));
//   PSTRAIN_RETURN_IF_ERROR(pool->Forward(x, y));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(pool->Backward(dy, dx));
//
// cuDNN's max-pooling backward finds each window's maximum again from the
// forward's input and output, so Forward keeps its own copies of both (the
// caller may overwrite x and y afterwards, as with the CPU op's workspace).
//
// Padding: Keras "same" pads total / 2 before and the rest after, which can
// be asymmetric, while cuDNN pads symmetrically (and what cuDNN's padding
// contributes to a maximum is not something this op relies on). So the op
// never asks cuDNN to pad: when Keras pads, the copy of x is the padded
// [N, H + pad_top + pad_bottom, W + pad_left + pad_right, C] tensor with
// -infinity around it (padded positions never win, as in Keras), cuDNN pools
// it without padding, and dx is cropped from the padded gradient.
//
// The mode is CUDNN_POOLING_MAX_DETERMINISTIC. All work is enqueued on the
// device's stream. Not thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_MAX_POOL2D_H_
#define PSTRAIN_COMPUTE_GPU_MAX_POOL2D_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/gpu/cudnn_util.h"
#include "compute/gpu/device.h"
#include "compute/gpu/kernels.h"
#include "compute/pool2d_base.h"

namespace pstrain {
namespace worker {
namespace gpu {

// Forward, Backward and their checks are Pool2DBase's
// (compute/pool2d_base.h); this is the cuDNN half.
class MaxPool2DOp : public Pool2DBase {
 public:
  // INVALID_ARGUMENT for a non-positive size, a pool larger than a valid
  // input or a null device; a CUDA or cuDNN failure as a status naming
  // MaxPool2D and the call.
  static absl::StatusOr<std::unique_ptr<MaxPool2DOp>> Create(
      const Pool2DShape& shape, Device* device);

  // Whether Keras pads this shape (the op then pools a padded copy).
  bool pads_input() const { return pads_input_; }

 private:
  MaxPool2DOp(const Pool2DShape& shape, const PoolWindows& windows,
              Device* device);

  absl::Status Init();
  absl::Status RunForward(const float* x, float* y) override;
  absl::Status RunBackward(const float* dy, float* dx) override;

  Device* const device_;
  const bool pads_input_;
  // Where x sits inside its (possibly padded) copy.
  const PadGeometry geometry_;

  TensorDescriptor x_desc_;  // The padded copy's shape.
  TensorDescriptor y_desc_;
  PoolingDescriptor pool_desc_;
  DeviceBuffer x_copy_;     // Forward's input, padded with -infinity.
  DeviceBuffer y_copy_;     // Forward's output.
  DeviceBuffer dx_padded_;  // Only when pads_input_.
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_MAX_POOL2D_H_
