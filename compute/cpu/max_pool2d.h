// Keras MaxPool2D (channels_last) forward and backward on oneDNN.
//
//   Pool2DShape shape;
//   shape.batch = 32; shape.height = 28; shape.width = 28; shape.channels = 32;
//   shape.pool_h = shape.pool_w = 2;
//   shape.stride_h = shape.stride_w = 2;  // Keras: strides default to pool.
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<MaxPool2DOp> pool,
//                            MaxPool2DOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(pool->Forward(x, y));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(pool->Backward(dy, dx));
//
// Forward records in a workspace (allocated once, in Create) where each
// maximum came from; Backward routes dy there. With "same" padding the padded
// positions never win, as in Keras. Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_MAX_POOL2D_H_
#define PSTRAIN_COMPUTE_CPU_MAX_POOL2D_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compute/cpu/dnnl_pool2d.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {
namespace cpu {

// Forward, Backward and their checks are Pool2DBase's
// (compute/pool2d_base.h); the oneDNN work is DnnlPool2DOp's.
class MaxPool2DOp : public DnnlPool2DOp {
 public:
  // INVALID_ARGUMENT for a non-positive size or a pool larger than a valid
  // input; a oneDNN failure as a status naming MaxPool2D.
  static absl::StatusOr<std::unique_ptr<MaxPool2DOp>> Create(
      const Pool2DShape& shape, Engine* engine);

 private:
  using DnnlPool2DOp::DnnlPool2DOp;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_MAX_POOL2D_H_
