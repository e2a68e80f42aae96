// Keras AveragePooling2D (channels_last) on oneDNN, and Keras's global
// pools (GlobalAveragePooling1D/2D, GlobalMaxPooling1D/2D) in plain loops;
// forward and backward, float32. (MaxPool2D is max_pool2d.h.)
//
// AvgPool2DOp: x [N, H, W, C] -> y [N, out_h, out_w, C], each output the
// mean of the input elements its window covers. Output sizes and padding are
// Keras's (window.h): "valid" -> floor((in - pool) / stride) + 1, "same" ->
// ceil(in / stride) with TensorFlow's split of the padding; with "same" the
// mean divides by the number of elements inside the input, never counting
// padding (oneDNN's pooling_avg_exclude_padding, as TensorFlow's AvgPool).
// Backward gives each element of a window dy / (that window's count).
//
//   Pool2DShape shape;  // op_shapes.h
//   shape.batch = 32; shape.height = 28; shape.width = 28; shape.channels = 8;
//   shape.pool_h = shape.pool_w = 2;
//   shape.stride_h = shape.stride_w = 2;  // Keras: strides default to pool.
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AvgPool2DOp> pool,
//                            AvgPool2DOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(pool->Forward(x, y));
//   PSTRAIN_RETURN_IF_ERROR(pool->Backward(dy, dx));
//
// GlobalPoolOp: x [batch, steps, channels] -> y [batch, channels], where
// steps is the product of the middle axes ([b, t, c] for the 1D layers,
// [b, h, w, c] for the 2D ones, steps = h * w); keepdims=True's
// [b, 1, 1, c] is the same buffer as [b, c]. Average: y = sum_s x / steps
// (double accumulation), dx[b, s, c] = dy[b, c] / steps. Max: y = max_s x,
// and the gradient goes to the first maximum only (the lowest s), whose
// index Forward records; the other dx are 0.
//
//   PSTRAIN_ASSIGN_OR_RETURN(
//       std::unique_ptr<GlobalPoolOp> gap,
//       GlobalPoolOp::Create({batch, h * w, c, GlobalPoolMode::kAverage}));
//
// Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_POOL2D_H_
#define PSTRAIN_COMPUTE_CPU_POOL2D_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/dnnl_pool2d.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {
namespace cpu {

// Forward, Backward and their checks are Pool2DBase's
// (compute/pool2d_base.h); the oneDNN work is DnnlPool2DOp's. Backward needs
// no Forward.
class AvgPool2DOp : public DnnlPool2DOp {
 public:
  // INVALID_ARGUMENT for a non-positive size or a pool larger than a valid
  // input; a oneDNN failure as a status naming AvgPool2D.
  static absl::StatusOr<std::unique_ptr<AvgPool2DOp>> Create(
      const Pool2DShape& shape, Engine* engine);

 private:
  using DnnlPool2DOp::DnnlPool2DOp;
};

enum class GlobalPoolMode { kAverage, kMax };

struct GlobalPoolShape {
  int64_t batch = 0;
  int64_t steps = 0;  // Product of the axes between batch and channels.
  int64_t channels = 0;
  GlobalPoolMode mode = GlobalPoolMode::kAverage;
};

class GlobalPoolOp {
 public:
  // INVALID_ARGUMENT for a non-positive size.
  static absl::StatusOr<std::unique_ptr<GlobalPoolOp>> Create(
      const GlobalPoolShape& shape);

  GlobalPoolOp(const GlobalPoolOp&) = delete;
  GlobalPoolOp& operator=(const GlobalPoolOp&) = delete;

  const GlobalPoolShape& shape() const { return shape_; }

  // x: [batch, steps, channels]; y: [batch, channels]. kMax records where
  // each maximum came from.
  absl::Status Forward(const float* x, float* y);

  // dx [batch, steps, channels] (overwritten) from dy [batch, channels].
  // kMax: through the maxima of the last Forward, FAILED_PRECONDITION
  // before any.
  absl::Status Backward(const float* dy, float* dx);

 private:
  explicit GlobalPoolOp(const GlobalPoolShape& shape);

  const GlobalPoolShape shape_;
  bool has_forward_ = false;
  std::vector<double> sums_;     // kAverage: [channels].
  std::vector<int64_t> argmax_;  // kMax: [batch, channels], the step.
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_POOL2D_H_
