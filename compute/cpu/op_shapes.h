// The shapes of the compute ops, shared by the CPU ops (oneDNN) and the GPU
// ops (compute/gpu, cuDNN and cuBLAS), so that both take the same
// description of a layer. Plain data; no library headers.
#ifndef PSTRAIN_COMPUTE_CPU_OP_SHAPES_H_
#define PSTRAIN_COMPUTE_CPU_OP_SHAPES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "compute/cpu/window.h"
#include "model/model_spec.h"

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
  // Taps of the kernel this many inputs apart (Keras's dilation_rate).
  int64_t dilation_h = 1;
  int64_t dilation_w = 1;
  // A grouped convolution: in_channels and out_channels split into `groups`
  // consecutive groups, output group g reading input group g only; the
  // kernel is [kh, kw, in_channels / groups, out_channels] (Keras's layout;
  // DepthwiseConv2D is groups = in_channels).
  int64_t groups = 1;
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
  // bf16 mixed precision (compute/precision.h): the convolutions read bf16
  // copies of x, w and dy and write float32 y, dx and dw (oneDNN accumulates
  // in float32). Every buffer the caller passes stays float32.
  bool bf16 = false;
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
  // bf16 mixed precision, as Conv2DShape::bf16: the matmuls read bf16
  // copies of x, w and dy and write float32 y, dx and dw.
  bool bf16 = false;
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

// BatchNormalization over the last axis: x viewed as [rows, channels]
// (cpu/batch_norm.h, gpu/batch_norm.h).
struct BatchNormShape {
  int64_t rows = 0;  // Batch times spatial positions (all axes but the last).
  int64_t channels = 0;   // The last axis.
  float epsilon = 1e-3f;  // Keras's default.
  bool center = true;     // Keras center: add beta [channels].
  bool scale = true;      // Keras scale: multiply by gamma [channels].
};

// LayerNormalization over the last axis: x viewed as [rows, width]
// (cpu/layer_norm.h, gpu/layer_norm.h).
struct LayerNormShape {
  int64_t rows = 0;       // Product of all axes but the last, batch included.
  int64_t width = 0;      // The normalized (last) axis.
  float epsilon = 1e-3f;  // Keras's default.
  bool center = true;     // Keras center: add beta [width].
  bool scale = true;      // Keras scale: multiply by gamma [width].
};

// MultiHeadAttention on rank-3 inputs (cpu/attention.h, gpu/attention.h).
struct AttentionShape {
  int64_t batch = 0;
  int64_t tq = 0;          // query sequence length
  int64_t tv = 0;          // key and value sequence length
  int64_t dq = 0;          // query features
  int64_t dk = 0;          // key features (dv when key defaults to value)
  int64_t dv = 0;          // value features
  int64_t heads = 0;       // num_heads
  int64_t key_dim = 0;     // per-head size of Q and K
  int64_t value_dim = 0;   // per-head size of V; 0: key_dim (Keras's default)
  int64_t output_dim = 0;  // output_shape; 0: dq (Keras's default)
  bool use_bias = true;
  bool causal = false;  // use_causal_mask=True
  double dropout = 0;   // Keras's dropout; only 0 is supported
};

// The layer's variables, each a pointer to row-major data of its Keras 3
// shape (host memory for the CPU op, device memory for the GPU op). The
// biases are null iff !use_bias.
struct AttentionWeights {
  const float* query_kernel = nullptr;   // query/kernel [dq, H, Dk]
  const float* query_bias = nullptr;     // query/bias [H, Dk]
  const float* key_kernel = nullptr;     // key/kernel [dk, H, Dk]
  const float* key_bias = nullptr;       // key/bias [H, Dk]
  const float* value_kernel = nullptr;   // value/kernel [dv, H, Dv]
  const float* value_bias = nullptr;     // value/bias [H, Dv]
  const float* output_kernel = nullptr;  // attention_output/kernel [H, Dv, O]
  const float* output_bias = nullptr;    // attention_output/bias [O]
};

// Where Backward writes, overwriting: the variables' gradients (shaped as in
// AttentionWeights; the biases' null iff !use_bias) and the inputs'
// gradients, each null when not wanted. Input gradient buffers are either
// the same buffer or disjoint; the same buffer receives their sum.
struct AttentionGradients {
  float* query_kernel = nullptr;
  float* query_bias = nullptr;
  float* key_kernel = nullptr;
  float* key_bias = nullptr;
  float* value_kernel = nullptr;
  float* value_bias = nullptr;
  float* output_kernel = nullptr;
  float* output_bias = nullptr;
  float* query = nullptr;  // [B, Tq, dq]
  float* key = nullptr;    // [B, Tv, dk]
  float* value = nullptr;  // [B, Tv, dv]
};

// A size and the name an op's argument check gives it.
using NamedSize = std::pair<const char*, int64_t>;

// The sizes of a shape that its ops require positive, named as its fields
// (both devices' argument checks: cpu/dnnl_util.h's CheckPositive,
// gpu/shape_check.h's CheckDims).
inline std::vector<NamedSize> PositiveSizes(const Conv2DShape& s) {
  return {{"batch", s.batch},
          {"height", s.height},
          {"width", s.width},
          {"in_channels", s.in_channels},
          {"out_channels", s.out_channels},
          {"kernel_h", s.kernel_h},
          {"kernel_w", s.kernel_w},
          {"stride_h", s.stride_h},
          {"stride_w", s.stride_w},
          {"dilation_h", s.dilation_h},
          {"dilation_w", s.dilation_w},
          {"groups", s.groups}};
}
inline std::vector<NamedSize> PositiveSizes(const AttentionShape& s) {
  return {{"batch", s.batch},
          {"tq", s.tq},
          {"tv", s.tv},
          {"dq", s.dq},
          {"dk", s.dk},
          {"dv", s.dv},
          {"heads", s.heads},
          {"key_dim", s.key_dim},
          {"value_dim", s.value_dim},
          {"output_dim", s.output_dim}};
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_OP_SHAPES_H_
