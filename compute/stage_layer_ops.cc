#include "compute/stage_layer_ops.h"

#include <vector>

namespace pstrain {
namespace worker {
namespace {

// The attention layer's variables' buffers among `values`, in
// StagePlan::attention_variables' order.
template <typename Pointer>
std::vector<Pointer> AttentionBuffers(const StagePlan& p,
                                      absl::Span<Pointer const> values) {
  std::vector<Pointer> out;
  for (const int index : p.attention_variables) {
    out.push_back(StageVariable(values, index));
  }
  return out;
}

}  // namespace

cpu::AttentionWeights StageAttentionWeights(
    const StagePlan& p, absl::Span<const float* const> weights) {
  const std::vector<const float*> w = AttentionBuffers(p, weights);
  cpu::AttentionWeights a;
  a.query_kernel = w[0];
  a.query_bias = w[1];
  a.key_kernel = w[2];
  a.key_bias = w[3];
  a.value_kernel = w[4];
  a.value_bias = w[5];
  a.output_kernel = w[6];
  a.output_bias = w[7];
  return a;
}

cpu::AttentionGradients StageAttentionGradients(
    const StagePlan& p, absl::Span<float* const> gradients,
    absl::Span<float* const> dx) {
  const std::vector<float*> dw = AttentionBuffers(p, gradients);
  cpu::AttentionGradients g;
  g.query_kernel = dw[0];
  g.query_bias = dw[1];
  g.key_kernel = dw[2];
  g.key_bias = dw[3];
  g.value_kernel = dw[4];
  g.value_bias = dw[5];
  g.output_kernel = dw[6];
  g.output_bias = dw[7];
  g.query = dx[0];
  g.value = dx[1];
  g.key = dx.size() > 2 ? dx[2] : dx[1];
  return g;
}

}  // namespace worker
}  // namespace pstrain
