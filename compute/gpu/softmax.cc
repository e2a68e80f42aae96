#include "compute/gpu/softmax.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/shape_check.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr char kOp[] = "Softmax";

}  // namespace

absl::StatusOr<std::unique_ptr<SoftmaxOp>> SoftmaxOp::Create(
    const SoftmaxShape& shape, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckDims(kOp, {{"batch", shape.batch}, {"classes", shape.classes}}));
  PSTRAIN_RETURN_IF_ERROR(
      CheckElements(kOp, "x", {shape.batch, shape.classes}));
  PSTRAIN_RETURN_IF_ERROR(CheckDevice(kOp, device));
  std::unique_ptr<SoftmaxOp> op(new SoftmaxOp(shape, device));
  PSTRAIN_RETURN_IF_ERROR(device->MakeCurrent());
  PSTRAIN_ASSIGN_OR_RETURN(op->desc_,
                           MatrixTensor(kOp, shape.batch, shape.classes));
  return op;
}

absl::Status SoftmaxOp::RunForward(const float* x, float* y) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const float one = 1.0f;
  const float zero = 0.0f;
  return CudnnStatus(
      cudnnSoftmaxForward(device_->cudnn(), CUDNN_SOFTMAX_ACCURATE,
                          CUDNN_SOFTMAX_MODE_INSTANCE, &one, desc_.get(), x,
                          &zero, desc_.get(), y),
      "Softmax forward: cudnnSoftmaxForward");
}

absl::Status SoftmaxOp::RunBackward(const float* y, const float* dy,
                                    float* dx) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const float one = 1.0f;
  const float zero = 0.0f;
  return CudnnStatus(
      cudnnSoftmaxBackward(device_->cudnn(), CUDNN_SOFTMAX_ACCURATE,
                           CUDNN_SOFTMAX_MODE_INSTANCE, &one, desc_.get(), y,
                           desc_.get(), dy, &zero, desc_.get(), dx),
      "Softmax backward: cudnnSoftmaxBackward");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
