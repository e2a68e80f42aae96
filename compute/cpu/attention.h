// Keras 3's MultiHeadAttention (keras.layers.MultiHeadAttention) forward and
// backward on oneDNN, float32, for rank-3 inputs (attention over the one
// sequence axis, Keras's default attention_axes):
//
//   Q = query x Wq + bq    query [B, Tq, dq], Wq [dq, H, Dk] -> [B, Tq, H, Dk]
//   K = key   x Wk + bk    key   [B, Tv, dk], Wk [dk, H, Dk] -> [B, Tv, H, Dk]
//   V = value x Wv + bv    value [B, Tv, dv], Wv [dv, H, Dv] -> [B, Tv, H, Dv]
//   P = softmax over Tv of (Q / sqrt(Dk)) K^T, per head  -> [B, H, Tq, Tv]
//   C = P V, per head                                    -> [B, Tq, H, Dv]
//   y = C x Wo + bo        Wo [H, Dv, O]                 -> [B, Tq, O]
//
// The variables keep Keras 3's names, shapes and row-major layouts (see
// Variables()), so what the ps holds loads into a Keras layer and back
// unchanged. With causal (Keras's use_causal_mask=True) query position i
// attends to key positions j <= i only; masked probabilities are exactly 0,
// as Keras's -1e9 before the softmax makes them. Keras's attention dropout is
// not supported: Create refuses a non-zero rate.
//
// Self-attention (Keras's key defaulting to value, or query = key = value)
// passes the same pointer more than once. Forward only reads its inputs.
// Backward gives each input gradient its own pointer; where two of them are
// the same buffer it writes their sum there, so the caller of a
// self-attention passes one buffer for all three and gets the whole gradient:
//
//   AttentionShape shape;
//   shape.batch = 32; shape.tq = shape.tv = 64; shape.dq = shape.dk =
//   shape.dv = 128; shape.heads = 8; shape.key_dim = 16; shape.causal = true;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AttentionOp> mha,
//                            AttentionOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(mha->Forward(x, x, x, weights, y));
//   grads.query = grads.key = grads.value = dx;  // plus the 8 variables
//   PSTRAIN_RETURN_IF_ERROR(mha->Backward(x, x, x, weights, dy, grads));
//
// Every oneDNN primitive and every intermediate buffer (Q, K, V, P, C and
// their gradients) is made in Create; Forward and Backward allocate nothing.
// Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_ATTENTION_H_
#define PSTRAIN_COMPUTE_CPU_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "compute/shaped_op.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// A variable's name within the layer (Keras 3's path below the layer's
// name) and its shape.
struct AttentionVariable {
  std::string name;
  std::vector<int64_t> dims;
};

class AttentionOp : public ShapedOp<AttentionShape> {
 public:
  // INVALID_ARGUMENT for a non-positive size (after the defaults), a size
  // whose buffers would not fit in memory, or a dropout outside [0, 1);
  // UNIMPLEMENTED for a non-zero dropout; a oneDNN failure as a status
  // naming MultiHeadAttention.
  static absl::StatusOr<std::unique_ptr<AttentionOp>> Create(
      const AttentionShape& shape, Engine* engine);

  // Keras 3's variables in its order (query, key, value, attention_output;
  // kernel then bias), with value_dim and output_dim defaulted as in Create.
  static std::vector<AttentionVariable> Variables(const AttentionShape& shape);

  // y [B, Tq, O] from query [B, Tq, dq], key [B, Tv, dk] and value
  // [B, Tv, dv]; any of the inputs may be the same buffer.
  absl::Status Forward(const float* query, const float* key, const float* value,
                       const AttentionWeights& weights, float* y);

  // The gradients in `grads` from dy = dL/dy [B, Tq, O].
  // REQUIRES: the last Forward ran on these inputs and weights (Backward
  // reuses its projections and probabilities).
  absl::Status Backward(const float* query, const float* key,
                        const float* value, const AttentionWeights& weights,
                        const float* dy, const AttentionGradients& grads);

  // The attention probabilities P [B, H, Tq, Tv] of the last Forward
  // (Keras's return_attention_scores).
  const float* probabilities() const { return probs_.data(); }

 private:
  // One matmul primitive and its argument memories, whose data handles are
  // set per call.
  struct Matmul {
    dnnl::matmul primitive;
    dnnl::memory src, weights, bias, dst;
    std::unordered_map<int, dnnl::memory> args;
  };

  AttentionOp(const AttentionShape& shape, Engine* engine)
      : ShapedOp(shape), engine_(engine) {}

  // dst = scale * (src x weights) [+ bias] [+ dst when accumulate].
  static Matmul MakeMatmul(const dnnl::engine& engine,
                           const dnnl::memory::desc& src,
                           const dnnl::memory::desc& weights,
                           const dnnl::memory::desc* bias,
                           const dnnl::memory::desc& dst, float scale = 1.0f,
                           bool accumulate = false);

  absl::Status Init();
  absl::Status Run(const char* what, Matmul& matmul, const float* src,
                   const float* weights, const float* bias, float* dst);
  // Sets the scores of masked (later) key positions to -inf.
  void MaskScores();
  absl::Status InputGradients(const AttentionWeights& weights,
                              const AttentionGradients& grads);

  Engine* const engine_;

  // Saved by Forward for Backward: Q [B, Tq, H, Dk], K [B, Tv, H, Dk],
  // V [B, Tv, H, Dv], P [B, H, Tq, Tv], C [B, Tq, H, Dv].
  std::vector<float> q_, k_, v_, probs_, context_;
  // Backward's scratch: dC, dP (then dS, in place), dQ, dK, dV.
  std::vector<float> d_context_, d_probs_, d_q_, d_k_, d_v_;

  Matmul query_proj_, key_proj_, value_proj_, scores_, combine_, output_proj_;
  Matmul d_output_kernel_, d_context_mm_, d_probs_mm_, d_v_mm_, d_q_mm_,
      d_k_mm_, d_query_kernel_, d_key_kernel_, d_value_kernel_;
  // Input gradients; the _sum_ forms add into their destination (used when
  // it is the buffer an earlier input gradient went to) and exist only where
  // the shapes allow that sharing.
  Matmul d_query_, d_query_sum_, d_key_, d_key_sum_, d_value_;

  dnnl::memory probs_mem_, d_probs_mem_;
  dnnl::softmax_forward softmax_fwd_;
  std::unordered_map<int, dnnl::memory> softmax_fwd_args_;
  dnnl::softmax_backward softmax_bwd_;
  std::unordered_map<int, dnnl::memory> softmax_bwd_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_ATTENTION_H_
