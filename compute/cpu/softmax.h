// Softmax over the last axis of [N, classes] on oneDNN, forward and backward.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SoftmaxOp> softmax,
//                            SoftmaxOp::Create({batch, 10}, engine));
//   PSTRAIN_RETURN_IF_ERROR(softmax->Forward(logits, probs));
//   ... dprobs from SparseCrossEntropyFromProbabilities (losses.h) ...
//   PSTRAIN_RETURN_IF_ERROR(softmax->Backward(probs, dprobs, dlogits));
//
// A model whose last layer is Dense + softmax trains more accurately with
// SparseSoftmaxCrossEntropyFromLogits on the Dense output, which skips this
// op in training (Keras does the same when it can see the logits).
// Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_SOFTMAX_H_
#define PSTRAIN_COMPUTE_CPU_SOFTMAX_H_

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "compute/output_backward_base.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// Forward, Backward and their checks are OutputBackwardBase's
// (compute/output_backward_base.h); this is the oneDNN half.
class SoftmaxOp : public OutputBackwardBase {
 public:
  // INVALID_ARGUMENT for a non-positive size.
  static absl::StatusOr<std::unique_ptr<SoftmaxOp>> Create(
      const SoftmaxShape& shape, Engine* engine);

  const SoftmaxShape& shape() const { return shape_; }

 private:
  SoftmaxOp(const SoftmaxShape& shape, Engine* engine)
      : OutputBackwardBase("Softmax"), shape_(shape), engine_(engine) {}

  // y[i, :] = softmax(x[i, :]), both [N, classes]; dx = y * (dy - sum(dy *
  // y)) per row.
  absl::Status RunForward(const float* x, float* y) override;
  absl::Status RunBackward(const float* y, const float* dy, float* dx) override;

  absl::Status Init();

  const SoftmaxShape shape_;
  Engine* const engine_;
  dnnl::memory x_mem_, y_mem_, dy_mem_, dx_mem_;
  dnnl::softmax_forward fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  dnnl::softmax_backward bwd_;
  std::unordered_map<int, dnnl::memory> bwd_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_SOFTMAX_H_
