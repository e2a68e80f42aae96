// What every layer op class of either device (compute/cpu/*.h,
// compute/gpu/*.h) has alike: the shape it was made for, with its defaults
// resolved, and no copies (an op owns its buffers and primitives). An op
// derives from it rather than declaring both again:
//
//   class AttentionOp : public ShapedOp<AttentionShape> {
//     AttentionOp(const AttentionShape& shape, Engine* engine)
//         : ShapedOp(shape), engine_(engine) {}
//   };
//   op->shape().value_dim;  // Resolved from key_dim where it was 0.
#ifndef PSTRAIN_COMPUTE_SHAPED_OP_H_
#define PSTRAIN_COMPUTE_SHAPED_OP_H_

namespace pstrain {
namespace worker {

template <typename Shape>
class ShapedOp {
 public:
  ShapedOp(const ShapedOp&) = delete;
  ShapedOp& operator=(const ShapedOp&) = delete;

  // The shape, with the op's defaults resolved.
  const Shape& shape() const { return shape_; }

 protected:
  explicit ShapedOp(const Shape& shape) : shape_(shape) {}
  ~ShapedOp() = default;

  const Shape shape_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_SHAPED_OP_H_
