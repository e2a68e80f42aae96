#include "compute/gpu/max_pool2d.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/shape_check.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr char kOp[] = "MaxPool2D";

PadGeometry Geometry(const Pool2DShape& s, const Window& h, const Window& w) {
  PadGeometry g;
  g.height = s.height;
  g.width = s.width;
  g.channels = s.channels;
  g.top = h.pad_before;
  g.left = w.pad_before;
  g.padded_height = s.height + h.pad_before + h.pad_after;
  g.padded_width = s.width + w.pad_before + w.pad_after;
  return g;
}

}  // namespace

MaxPool2DOp::MaxPool2DOp(const Pool2DShape& shape, const PoolWindows& windows,
                         Device* device)
    : Pool2DBase(kOp, shape, windows, /*backward_needs_forward=*/true),
      device_(device),
      pads_input_(out_h_.pad_before + out_h_.pad_after + out_w_.pad_before +
                      out_w_.pad_after >
                  0),
      geometry_(Geometry(shape, out_h_, out_w_)) {}

absl::StatusOr<std::unique_ptr<MaxPool2DOp>> MaxPool2DOp::Create(
    const Pool2DShape& shape, Device* device) {
  // Sizes within cuDNN's int.
  PSTRAIN_ASSIGN_OR_RETURN(
      const PoolWindows windows,
      cpu::CheckPool2D(kOp, shape, std::numeric_limits<int32_t>::max()));
  const Window& out_h = windows.height;
  const Window& out_w = windows.width;
  PSTRAIN_RETURN_IF_ERROR(CheckElements(
      kOp, "padded x",
      {shape.batch, shape.height + out_h.pad_before + out_h.pad_after,
       shape.width + out_w.pad_before + out_w.pad_after, shape.channels}));
  PSTRAIN_RETURN_IF_ERROR(CheckDevice(kOp, device));
  std::unique_ptr<MaxPool2DOp> op(new MaxPool2DOp(shape, windows, device));
  PSTRAIN_RETURN_IF_ERROR(op->Init());
  return op;
}

absl::Status MaxPool2DOp::Init() {
  const Pool2DShape& s = shape_;
  const PadGeometry& g = geometry_;
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_ASSIGN_OR_RETURN(x_desc_, NhwcTensor(kOp, s.batch, g.padded_height,
                                               g.padded_width, s.channels));
  PSTRAIN_ASSIGN_OR_RETURN(y_desc_, NhwcTensor(kOp, s.batch, out_h_.output,
                                               out_w_.output, s.channels));
  PSTRAIN_ASSIGN_OR_RETURN(pool_desc_, CreatePoolingDescriptor(kOp));
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetPooling2dDescriptor(
                      pool_desc_.get(), CUDNN_POOLING_MAX_DETERMINISTIC,
                      CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(s.pool_h),
                      static_cast<int>(s.pool_w), /*verticalPadding=*/0,
                      /*horizontalPadding=*/0, static_cast<int>(s.stride_h),
                      static_cast<int>(s.stride_w)),
                  "MaxPool2D: cudnnSetPooling2dDescriptor"));
  int n = 0, c = 0, h = 0, w = 0;
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnGetPooling2dForwardOutputDim(
                      pool_desc_.get(), x_desc_.get(), &n, &c, &h, &w),
                  "MaxPool2D: cudnnGetPooling2dForwardOutputDim"));
  if (n != s.batch || c != s.channels || h != out_h_.output ||
      w != out_w_.output) {
    return absl::InternalError(
        absl::StrCat(kOp, ": cuDNN's output [", n, ", ", h, ", ", w, ", ", c,
                     "] differs from Keras's [", s.batch, ", ", out_h_.output,
                     ", ", out_w_.output, ", ", s.channels, "]"));
  }
  const int64_t x_bytes = s.batch * g.padded_height * g.padded_width *
                          s.channels * int64_t{sizeof(float)};
  const int64_t y_bytes = s.batch * out_h_.output * out_w_.output * s.channels *
                          int64_t{sizeof(float)};
  PSTRAIN_ASSIGN_OR_RETURN(x_copy_, device_->Allocate(x_bytes));
  PSTRAIN_ASSIGN_OR_RETURN(y_copy_, device_->Allocate(y_bytes));
  if (pads_input_) {
    PSTRAIN_ASSIGN_OR_RETURN(dx_padded_, device_->Allocate(x_bytes));
  }
  return absl::OkStatus();
}

absl::Status MaxPool2DOp::RunForward(const float* x, float* y) {
  cudaStream_t stream = device_->stream();
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  if (pads_input_) {
    PSTRAIN_RETURN_IF_ERROR(
        CudaStatus(LaunchPadNhwc(x, shape_.batch, geometry_,
                                 -std::numeric_limits<float>::infinity(),
                                 x_copy_.floats(), stream),
                   "MaxPool2D forward: pad x"));
  } else {
    PSTRAIN_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(x_copy_.data(), x, x_copy_.bytes(),
                                   cudaMemcpyDeviceToDevice, stream),
                   "MaxPool2D forward: copy x"));
  }
  const float one = 1.0f;
  const float zero = 0.0f;
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnPoolingForward(device_->cudnn(), pool_desc_.get(), &one,
                                      x_desc_.get(), x_copy_.data(), &zero,
                                      y_desc_.get(), y_copy_.data()),
                  "MaxPool2D forward: cudnnPoolingForward"));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(y, y_copy_.data(), y_copy_.bytes(),
                                 cudaMemcpyDeviceToDevice, stream),
                 "MaxPool2D forward: copy y"));
  return absl::OkStatus();
}

absl::Status MaxPool2DOp::RunBackward(const float* dy, float* dx) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const float one = 1.0f;
  const float zero = 0.0f;
  float* out = pads_input_ ? dx_padded_.floats() : dx;
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnPoolingBackward(device_->cudnn(), pool_desc_.get(), &one,
                           y_desc_.get(), y_copy_.data(), y_desc_.get(), dy,
                           x_desc_.get(), x_copy_.data(), &zero, x_desc_.get(),
                           out),
      "MaxPool2D backward: cudnnPoolingBackward"));
  if (!pads_input_) return absl::OkStatus();
  return CudaStatus(LaunchCropNhwc(dx_padded_.floats(), shape_.batch, geometry_,
                                   dx, device_->stream()),
                    "MaxPool2D backward: crop dx");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
