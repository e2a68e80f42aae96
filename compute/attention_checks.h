// The checks of a MultiHeadAttention op's shape and call arguments that the
// CPU and the GPU op (compute/cpu/attention.h, compute/gpu/attention.h) make
// alike, with the same messages, and Keras's shape defaults they both
// resolve. The ops check what only their device limits (buffer sizes, a
// device) themselves.
//
//   const AttentionShape s = AttentionWithDefaults(requested);
//   PSTRAIN_RETURN_IF_ERROR(CheckAttentionDropout(s));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(
//       CheckAttentionForward(shape_, query, key, value, weights, y));
#ifndef PSTRAIN_COMPUTE_ATTENTION_CHECKS_H_
#define PSTRAIN_COMPUTE_ATTENTION_CHECKS_H_

#include "absl/status/status.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {

// Keras's defaults: value_dim = key_dim and output_dim = dq where 0.
cpu::AttentionShape AttentionWithDefaults(cpu::AttentionShape shape);

// INVALID_ARGUMENT for a dropout outside [0, 1); UNIMPLEMENTED for any other
// non-zero one (attention dropout is not supported).
absl::Status CheckAttentionDropout(const cpu::AttentionShape& shape);

// INVALID_ARGUMENT unless the inputs, the kernels and y are given, and the
// biases are iff shape.use_bias.
absl::Status CheckAttentionForward(const cpu::AttentionShape& shape,
                                   const float* query, const float* key,
                                   const float* value,
                                   const cpu::AttentionWeights& weights,
                                   const float* y);

// INVALID_ARGUMENT unless the inputs, attention_output/kernel, dy and the
// kernels' gradients are given, the bias gradients are iff shape.use_bias,
// each wanted input gradient has its kernel, and input gradients that share
// a buffer have the same shape.
absl::Status CheckAttentionBackward(const cpu::AttentionShape& shape,
                                    const float* query, const float* key,
                                    const float* value,
                                    const cpu::AttentionWeights& weights,
                                    const float* dy,
                                    const cpu::AttentionGradients& grads);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_ATTENTION_CHECKS_H_
