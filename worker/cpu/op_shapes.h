// The shapes of the compute ops, shared by the CPU ops (oneDNN) and the GPU
// ops (worker/gpu, cuDNN and cuBLAS), so that both take the same
// description of a layer. Plain data; no library headers.
#ifndef PSTRAIN_WORKER_CPU_OP_SHAPES_H_
#define PSTRAIN_WORKER_CPU_OP_SHAPES_H_

#include <cstdint>

#include "worker/cpu/window.h"
#include "worker/model/model_spec.h"

namespace pstrain {
namespace worker {
namespace cpu {

struct Conv2DShape {
  int64_t batch = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel_h = 0;
  int64_t kernel_w = 0;
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  Padding padding = Padding::kValid;
  bool use_bias = true;
  // False for a first layer, whose input needs no gradient: Backward then
  // computes only dw and db, and no backward-data primitive is made.
  bool compute_dx = true;
  // Keras's activation="relu", fused into the convolution (a oneDNN
  // post-op; CPU only, the GPU op refuses it): Forward writes y = max(conv(x,
  // w) + b, 0) in one pass over y. Backward then takes dy as the gradient of
  // the PRE-activation, i.e. the caller first multiplies the output's gradient
  // by (y > 0) (ReluOp's Backward on y does that).
  bool fuse_relu = false;
};

// A 2D pooling window (MaxPooling2D, AveragePooling2D) over NHWC input.
struct Pool2DShape {
  int64_t batch = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t pool_h = 2;
  int64_t pool_w = 2;
  int64_t stride_h = 2;
  int64_t stride_w = 2;
  Padding padding = Padding::kValid;
};

struct DenseShape {
  int64_t batch = 0;
  int64_t in = 0;
  int64_t out = 0;
  bool use_bias = true;
  // False for a first layer: Backward computes only dw and db.
  bool compute_dx = true;
};

struct SoftmaxShape {
  int64_t batch = 0;
  int64_t classes = 0;
};

// An activation over [outer, axis, inner] (per example in a plan): softmax
// and log_softmax act along `axis`; the elementwise ones see outer * axis *
// inner elements alike.
struct ActivationShape {
  Activation activation = Activation::kLinear;
  ActivationParams params;
  int64_t outer = 1;
  int64_t axis = 1;
  int64_t inner = 1;
};

struct EmbeddingShape {
  int64_t ids = 0;  // Number of ids per call (batch * sequence length).
  int64_t input_dim = 0;
  int64_t output_dim = 0;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_CPU_OP_SHAPES_H_
