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

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/window.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

class MaxPool2DOp {
 public:
  // INVALID_ARGUMENT for a non-positive size or a pool larger than a valid
  // input; a oneDNN failure as a status naming MaxPool2D.
  static absl::StatusOr<std::unique_ptr<MaxPool2DOp>> Create(
      const Pool2DShape& shape, Engine* engine);

  MaxPool2DOp(const MaxPool2DOp&) = delete;
  MaxPool2DOp& operator=(const MaxPool2DOp&) = delete;

  const Pool2DShape& shape() const { return shape_; }
  int64_t out_height() const { return out_h_.output; }
  int64_t out_width() const { return out_w_.output; }

  // x: [N, H, W, C]; y: [N, out_height, out_width, C].
  absl::Status Forward(const float* x, float* y);

  // dx (overwritten) from dy, through the maxima of the last Forward.
  // FAILED_PRECONDITION before any Forward.
  absl::Status Backward(const float* dy, float* dx);

 private:
  MaxPool2DOp(const Pool2DShape& shape, Engine* engine, Window out_h,
              Window out_w)
      : shape_(shape), engine_(engine), out_h_(out_h), out_w_(out_w) {}

  absl::Status Init();

  const Pool2DShape shape_;
  Engine* const engine_;
  const Window out_h_;
  const Window out_w_;
  bool has_forward_ = false;

  dnnl::memory x_mem_, y_mem_, dy_mem_, dx_mem_, workspace_;
  dnnl::pooling_forward fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  dnnl::pooling_backward bwd_;
  std::unordered_map<int, dnnl::memory> bwd_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_MAX_POOL2D_H_
