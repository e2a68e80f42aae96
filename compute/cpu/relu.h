// ReLU forward and backward on oneDNN eltwise, over any activation viewed as
// a flat array of float32.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ReluOp> relu,
//                            ReluOp::Create(batch * 128, engine));
//   PSTRAIN_RETURN_IF_ERROR(relu->Forward(z, y));       // y = max(z, 0)
//   PSTRAIN_RETURN_IF_ERROR(relu->Backward(y, dy, dz));  // dz = dy * (y > 0)
//
// Backward reads the forward output y, not its input, so a caller may run
// Forward in place (z == y) and keep only y. Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_RELU_H_
#define PSTRAIN_COMPUTE_CPU_RELU_H_

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/engine.h"
#include "compute/output_backward_base.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// Forward, Backward and their checks are OutputBackwardBase's
// (compute/output_backward_base.h); this is the oneDNN half.
class ReluOp : public OutputBackwardBase {
 public:
  // INVALID_ARGUMENT unless num_elements > 0.
  static absl::StatusOr<std::unique_ptr<ReluOp>> Create(int64_t num_elements,
                                                        Engine* engine);

  int64_t num_elements() const { return num_elements_; }

 private:
  ReluOp(int64_t num_elements, Engine* engine)
      : OutputBackwardBase("ReLU"),
        num_elements_(num_elements),
        engine_(engine) {}

  // y = max(x, 0), x == y allowed; dx = dy where y > 0, else 0, dy == dx
  // allowed.
  absl::Status RunForward(const float* x, float* y) override;
  absl::Status RunBackward(const float* y, const float* dy, float* dx) override;

  absl::Status Init();

  const int64_t num_elements_;
  Engine* const engine_;
  dnnl::memory x_mem_, y_mem_, dy_mem_, dx_mem_;
  dnnl::eltwise_forward fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  dnnl::eltwise_backward bwd_;
  std::unordered_map<int, dnnl::memory> bwd_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_RELU_H_
