// The oneDNN half of the CPU's 2D pooling ops: one pooling primitive pair
// (forward_training and backward) over NHWC float32, for any oneDNN pooling
// algorithm. MaxPool2DOp (max_pool2d.h, pooling_max) and AvgPool2DOp
// (pool2d.h, pooling_avg_exclude_padding) derive from it and add only their
// factory; the public Forward/Backward and their checks are Pool2DBase's
// (compute/pool2d_base.h).
//
// Keras's padding (window.h) may be asymmetric; oneDNN takes the padding of
// each side, so the windows are Keras's exactly. When the algorithm keeps a
// workspace (pooling_max: where each maximum came from), it is allocated
// once, here, and Backward routes dy through the last Forward's. Not
// thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_DNNL_POOL2D_H_
#define PSTRAIN_COMPUTE_CPU_DNNL_POOL2D_H_

#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "compute/cpu/pool_windows.h"
#include "compute/pool2d_base.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

class DnnlPool2DOp : public Pool2DBase {
 protected:
  // `op` as Pool2DBase's; Backward needs a Forward iff the algorithm is
  // pooling_max.
  DnnlPool2DOp(const char* op, const Pool2DShape& shape,
               const PoolWindows& windows, Engine* engine,
               dnnl::algorithm algorithm)
      : Pool2DBase(op, shape, windows,
                   algorithm == dnnl::algorithm::pooling_max),
        engine_(engine),
        algorithm_(algorithm) {}

  // Builds the primitives; a oneDNN failure as a status naming the op.
  absl::Status Init();

 private:
  absl::Status RunForward(const float* x, float* y) override;
  absl::Status RunBackward(const float* dy, float* dx) override;

  Engine* const engine_;
  const dnnl::algorithm algorithm_;
  std::string forward_name_, backward_name_;  // "MaxPool2D forward", ...

  dnnl::memory x_mem_, y_mem_, dy_mem_, dx_mem_, workspace_;
  dnnl::pooling_forward fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  dnnl::pooling_backward bwd_;
  std::unordered_map<int, dnnl::memory> bwd_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_DNNL_POOL2D_H_
