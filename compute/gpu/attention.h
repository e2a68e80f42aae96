// Keras 3's MultiHeadAttention on the GPU: the twin of compute/cpu/attention.h
// (same shape struct, Keras variable layouts, formulas and Forward/Backward
// contract, including summed input gradients where buffers are shared), on
// device pointers, float32:
//
//   Q = query x Wq + bq    query [B, Tq, dq], Wq [dq, H, Dk] -> [B, Tq, H, Dk]
//   K = key   x Wk + bk    key   [B, Tv, dk], Wk [dk, H, Dk] -> [B, Tv, H, Dk]
//   V = value x Wv + bv    value [B, Tv, dv], Wv [dv, H, Dv] -> [B, Tv, H, Dv]
//   P = softmax over Tv of (Q / sqrt(Dk)) K^T, per head  -> [B, H, Tq, Tv]
//   C = P V, per head                                    -> [B, Tq, H, Dv]
//   y = C x Wo + bo        Wo [H, Dv, O]                 -> [B, Tq, O]
//
// With causal (use_causal_mask=True) query position i attends to key
// positions j <= i only (masked probabilities exactly 0). No attention
// dropout: Create refuses a non-zero rate, as the CPU op does.
//
//   AttentionShape shape;
//   shape.batch = 32; shape.tq = shape.tv = 64; shape.dq = shape.dk =
//   shape.dv = 128; shape.heads = 8; shape.key_dim = 16;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AttentionOp> mha,
//                            AttentionOp::Create(shape, device));
//   PSTRAIN_RETURN_IF_ERROR(mha->Forward(x, x, x, weights, y));
//   grads.query = grads.key = grads.value = dx;  // plus the 8 variables
//   PSTRAIN_RETURN_IF_ERROR(mha->Backward(x, x, x, weights, dy, grads));
//
// What runs: the four projections and their gradients are cuBLAS sgemm
// calls on the row-major matrices (computed transposed, as dense.h explains);
// the per-head products (scores, P V and their gradients) are one
// cublasSgemmStridedBatched each over all B * H heads, on copies of Q, K, V
// and C in head-major order [B, H, T, D] (pstrain's split/merge kernels, the
// projection biases added on the way); the softmax with its causal mask and
// the softmax's backward are pstrain's kernels, one warp per row
// (norm_attention_kernels.h); bias gradients are kernels.h's column sums.
// The cuBLAS handle computes in plain FP32 (the Device sets
// CUBLAS_DEFAULT_MATH: no TF32).
//
// Every intermediate buffer is allocated in Create; Forward and Backward
// allocate nothing. All work is enqueued on the device's stream. Not
// thread-safe; see Device.
#ifndef PSTRAIN_COMPUTE_GPU_ATTENTION_H_
#define PSTRAIN_COMPUTE_GPU_ATTENTION_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/gpu/device.h"
#include "compute/shaped_op.h"

namespace pstrain {
namespace worker {
namespace gpu {

using ::pstrain::worker::cpu::AttentionGradients;
using ::pstrain::worker::cpu::AttentionShape;
using ::pstrain::worker::cpu::AttentionWeights;

class AttentionOp : public ShapedOp<AttentionShape> {
 public:
  // INVALID_ARGUMENT for a non-positive size (after Keras's defaults:
  // value_dim = key_dim, output_dim = dq), a buffer of more than INT32_MAX
  // elements, a dropout outside [0, 1) or a null device; UNIMPLEMENTED for
  // a non-zero dropout; RESOURCE_EXHAUSTED when the buffers do not fit.
  static absl::StatusOr<std::unique_ptr<AttentionOp>> Create(
      const AttentionShape& shape, Device* device);

  // y [B, Tq, O] from query [B, Tq, dq], key [B, Tv, dk] and value
  // [B, Tv, dv]; any of the inputs may be the same buffer. The weights are
  // device pointers in Keras's layouts (cpu/op_shapes.h).
  absl::Status Forward(const float* query, const float* key, const float* value,
                       const AttentionWeights& weights, float* y);

  // The gradients in `grads` (device pointers; see AttentionGradients) from
  // dy = dL/dy [B, Tq, O]. Input gradients that share a buffer are summed
  // there. REQUIRES: the last Forward ran on these inputs and weights
  // (Backward reuses its projections and probabilities).
  absl::Status Backward(const float* query, const float* key,
                        const float* value, const AttentionWeights& weights,
                        const float* dy, const AttentionGradients& grads);

  // The attention probabilities P [B, H, Tq, Tv] of the last Forward
  // (Keras's return_attention_scores), a device pointer.
  const float* probabilities() const { return probs_.floats(); }

 private:
  // Forward's and Backward's sizes: shape_'s, with the projections' rows
  // (rq = B Tq, rv = B Tv) and widths (hk = H Dk, hv = H Dv), and the
  // scores' scale 1 / sqrt(Dk).
  struct Sizes {
    int64_t b, h, tq, tv, dk, dv, o, rq, rv, hk, hv;
    float scale;
  };
  static Sizes SizesOf(const AttentionShape& shape);

  AttentionOp(const AttentionShape& shape, Device* device)
      : ShapedOp(shape), sizes_(SizesOf(shape)), device_(device) {}

  absl::Status Allocate();
  absl::Status InputGradients(const AttentionWeights& weights,
                              const AttentionGradients& grads);

  const Sizes sizes_;
  Device* const device_;

  // Saved by Forward for Backward, head-major: Q [B, H, Tq, Dk],
  // K [B, H, Tv, Dk], V [B, H, Tv, Dv], P [B, H, Tq, Tv]; and C as the
  // output projection reads it, [B, Tq, H, Dv].
  DeviceBuffer q_, k_, v_, probs_, context_;
  // A projection before its split into heads (forward), dC before its split
  // (backward): the largest of [B, Tq or Tv, H, Dk or Dv].
  DeviceBuffer staging_;
  // Backward's: dC, dQ, dK, dV head-major; dP (then dS, in place); dQ, dK,
  // dV as [B, T, H, D] rows for the kernels' and inputs' gradients.
  DeviceBuffer d_context_, d_q_heads_, d_k_heads_, d_v_heads_, d_probs_;
  DeviceBuffer d_q_, d_k_, d_v_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_ATTENTION_H_
