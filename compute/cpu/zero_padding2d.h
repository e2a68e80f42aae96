// Keras ZeroPadding2D (channels_last), forward and backward, in plain loops
// (row copies; no arithmetic).
//
// Forward: x [N, H, W, C] -> y [N, top + H + bottom, left + W + right, C],
//   y[n, top + h, left + w, c] = x[n, h, w, c], every other element 0.
// Backward: the crop of dy back to the input's rows and columns,
//   dx[n, h, w, c] = dy[n, top + h, left + w, c].
//
//   ZeroPadding2DShape shape;
//   shape.batch = 32; shape.height = 28; shape.width = 28; shape.channels = 3;
//   shape.top = shape.bottom = shape.left = shape.right = 1;  // padding=1
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ZeroPadding2DOp> pad,
//                            ZeroPadding2DOp::Create(shape));
//   PSTRAIN_RETURN_IF_ERROR(pad->Forward(x, y));
//   PSTRAIN_RETURN_IF_ERROR(pad->Backward(dy, dx));
//
// Keras's padding=((top, bottom), (left, right)); padding=p means all four
// are p, padding=(a, b) means top = bottom = a, left = right = b. Stateless;
// safe to call from several threads on distinct buffers.
#ifndef PSTRAIN_COMPUTE_CPU_ZERO_PADDING2D_H_
#define PSTRAIN_COMPUTE_CPU_ZERO_PADDING2D_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {
namespace worker {
namespace cpu {

struct ZeroPadding2DShape {
  int64_t batch = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t top = 1;
  int64_t bottom = 1;
  int64_t left = 1;
  int64_t right = 1;
};

class ZeroPadding2DOp {
 public:
  // INVALID_ARGUMENT for a non-positive size or a negative padding.
  static absl::StatusOr<std::unique_ptr<ZeroPadding2DOp>> Create(
      const ZeroPadding2DShape& shape);

  const ZeroPadding2DShape& shape() const { return shape_; }
  int64_t out_height() const {
    return shape_.top + shape_.height + shape_.bottom;
  }
  int64_t out_width() const {
    return shape_.left + shape_.width + shape_.right;
  }

  // x: [N, H, W, C]; y: [N, out_height, out_width, C], overwritten.
  absl::Status Forward(const float* x, float* y) const;

  // dx [N, H, W, C] (overwritten) from dy [N, out_height, out_width, C].
  absl::Status Backward(const float* dy, float* dx) const;

 private:
  explicit ZeroPadding2DOp(const ZeroPadding2DShape& shape) : shape_(shape) {}

  const ZeroPadding2DShape shape_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_ZERO_PADDING2D_H_
