#include "compute/attention_checks.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace {

constexpr char kOp[] = "MultiHeadAttention";

// Whether all four pointers are given, or none, as use_bias asks.
bool BiasesMatch(bool use_bias, const float* query, const float* key,
                 const float* value, const float* output) {
  const bool all = query != nullptr && key != nullptr && value != nullptr &&
                   output != nullptr;
  const bool none = query == nullptr && key == nullptr && value == nullptr &&
                    output == nullptr;
  return use_bias ? all : none;
}

// Whether input gradients that share a buffer have the same shape.
bool SharedGradientsFit(const cpu::AttentionShape& s,
                        const cpu::AttentionGradients& g) {
  auto shared = [](const float* a, const float* b) {
    return a != nullptr && a == b;
  };
  if (shared(g.key, g.value) && s.dk != s.dv) return false;
  if (shared(g.query, g.value) && (s.tq != s.tv || s.dq != s.dv)) return false;
  if (shared(g.query, g.key) && (s.tq != s.tv || s.dq != s.dk)) return false;
  return true;
}

}  // namespace

cpu::AttentionShape AttentionWithDefaults(cpu::AttentionShape shape) {
  if (shape.value_dim == 0) shape.value_dim = shape.key_dim;
  if (shape.output_dim == 0) shape.output_dim = shape.dq;
  return shape;
}

absl::Status CheckAttentionDropout(const cpu::AttentionShape& s) {
  if (!(s.dropout >= 0 && s.dropout < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": dropout must be in [0, 1), got ", s.dropout));
  }
  if (s.dropout != 0) {
    return absl::UnimplementedError(absl::StrCat(
        kOp, ": attention dropout is not supported (rate ", s.dropout, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckAttentionForward(const cpu::AttentionShape& shape,
                                   const float* query, const float* key,
                                   const float* value,
                                   const cpu::AttentionWeights& w,
                                   const float* y) {
  if (query == nullptr || key == nullptr || value == nullptr || y == nullptr ||
      w.query_kernel == nullptr || w.key_kernel == nullptr ||
      w.value_kernel == nullptr || w.output_kernel == nullptr) {
    return absl::InvalidArgumentError(
        "MultiHeadAttention forward: the inputs, kernels and y are required");
  }
  if (!BiasesMatch(shape.use_bias, w.query_bias, w.key_bias, w.value_bias,
                   w.output_bias)) {
    return absl::InvalidArgumentError(
        "MultiHeadAttention forward: the biases must be given iff use_bias");
  }
  return absl::OkStatus();
}

absl::Status CheckAttentionBackward(const cpu::AttentionShape& shape,
                                    const float* query, const float* key,
                                    const float* value,
                                    const cpu::AttentionWeights& w,
                                    const float* dy,
                                    const cpu::AttentionGradients& g) {
  if (query == nullptr || key == nullptr || value == nullptr || dy == nullptr ||
      w.output_kernel == nullptr || g.query_kernel == nullptr ||
      g.key_kernel == nullptr || g.value_kernel == nullptr ||
      g.output_kernel == nullptr) {
    return absl::InvalidArgumentError(
        "MultiHeadAttention backward: the inputs, attention_output/kernel, "
        "dy and the kernels' gradients are required");
  }
  if (!BiasesMatch(shape.use_bias, g.query_bias, g.key_bias, g.value_bias,
                   g.output_bias)) {
    return absl::InvalidArgumentError(
        "MultiHeadAttention backward: the bias gradients must be given iff "
        "use_bias");
  }
  if ((g.query != nullptr && w.query_kernel == nullptr) ||
      (g.key != nullptr && w.key_kernel == nullptr) ||
      (g.value != nullptr && w.value_kernel == nullptr)) {
    return absl::InvalidArgumentError(
        "MultiHeadAttention backward: an input's gradient needs its kernel");
  }
  if (!SharedGradientsFit(shape, g)) {
    return absl::InvalidArgumentError(
        "MultiHeadAttention backward: input gradients share a buffer but "
        "their shapes differ");
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain
