// The layer ops that a graph stage calls the same way on the CPU and on the
// GPU (compute/cpu/graph_stage.h, compute/gpu/graph_stage.h): Conv2D,
// MaxPool2D, Dense, ReLU, last-axis softmax, Dropout, LayerNormalization
// and MultiHeadAttention, whose ops take the same arguments on both devices
// (host pointers on the CPU, device pointers on the GPU). What this routes
// is the same on both: which of the stage's inputs, variables and gradient
// buffers each op call gets. Each device keeps its own stages (embedding,
// BatchNormalization, the merges, ...) and its own Create, which makes these
// ops with its engine or device.
//
// The template's arguments are one device's op classes:
//
//   using LayerOps = StageLayerOps<Conv2DOp, MaxPool2DOp, DenseOp, ReluOp,
//                                  SoftmaxOp, DropoutOp, LayerNormOp,
//                                  AttentionOp>;
//   LayerOps ops;  // In the stage; its Create fills them.
//   if (LayerOps::Runs(plan.kind)) {
//     return ops.Forward(plan, inputs, weights, version, dropout, y);
//   }
//
// Errors name the stage's layer. Not thread-safe: a stage's ops are not.
#ifndef PSTRAIN_COMPUTE_STAGE_LAYER_OPS_H_
#define PSTRAIN_COMPUTE_STAGE_LAYER_OPS_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/cpu/dropout.h"
#include "compute/cpu/op_shapes.h"
#include "compute/layer_graph.h"
#include "compute/layer_plan.h"
#include "compute/rng_tracker.h"

namespace pstrain {
namespace worker {

// values[index], or null for index -1 (the plan's "no such variable").
template <typename T>
T* StageVariable(absl::Span<T* const> values, int index) {
  return index >= 0 ? values[index] : nullptr;
}

// The attention layer's variables (StagePlan::attention_variables' order)
// among the model's `weights`.
cpu::AttentionWeights StageAttentionWeights(
    const StagePlan& plan, absl::Span<const float* const> weights);

// Where the attention layer's Backward writes: its variables' gradients
// among the model's `gradients`, and its inputs' among dx (query, value and
// maybe key; Keras's key defaults to the value, so the op sums the key's
// gradient into the value's).
cpu::AttentionGradients StageAttentionGradients(
    const StagePlan& plan, absl::Span<float* const> gradients,
    absl::Span<float* const> dx);

template <typename Conv2D, typename MaxPool2D, typename Dense, typename Relu,
          typename Softmax, typename Dropout, typename LayerNorm,
          typename Attention>
struct StageLayerOps {
  // Whether a stage of `kind` is one of these ops'.
  static bool Runs(StageKind kind);

  // The stage's forward from its inputs (as in GraphStage::Forward) into y;
  // returns y, or inputs[0] for a Dropout in inference (`dropout` null).
  // REQUIRES: Runs(plan.kind), and the op of that kind made.
  absl::StatusOr<const void*> Forward(const StagePlan& plan,
                                      absl::Span<const void* const> inputs,
                                      absl::Span<const float* const> weights,
                                      uint64_t weights_version,
                                      const DropoutStep* dropout, float* y);

  // The stage's backward, as in GraphStage::Backward. A Conv2D stage with
  // `relu` made runs the ReLU's backward on dy first (the convolution
  // applied it). REQUIRES: as Forward's.
  absl::Status Backward(const StagePlan& plan,
                        absl::Span<const void* const> inputs, const float* y,
                        float* dy, absl::Span<float* const> dx,
                        absl::Span<const float* const> weights,
                        uint64_t weights_version,
                        absl::Span<float* const> gradients);

  std::unique_ptr<Conv2D> conv;
  std::unique_ptr<MaxPool2D> pool;
  std::unique_ptr<Dense> dense;
  std::unique_ptr<Relu> relu;  // Or a Conv2D's fused ReLU's.
  std::unique_ptr<Softmax> softmax;
  std::unique_ptr<Dropout> dropout;
  std::unique_ptr<LayerNorm> layer_norm;
  std::unique_ptr<Attention> attention;
};

template <typename Conv2D, typename MaxPool2D, typename Dense, typename Relu,
          typename Softmax, typename Dropout, typename LayerNorm,
          typename Attention>
bool StageLayerOps<Conv2D, MaxPool2D, Dense, Relu, Softmax, Dropout, LayerNorm,
                   Attention>::Runs(StageKind kind) {
  switch (kind) {
    case StageKind::kConv2D:
    case StageKind::kMaxPool2D:
    case StageKind::kDense:
    case StageKind::kRelu:
    case StageKind::kSoftmax:
    case StageKind::kDropout:
    case StageKind::kLayerNormalization:
    case StageKind::kMultiHeadAttention:
      return true;
    default:
      return false;
  }
}

template <typename Conv2D, typename MaxPool2D, typename Dense, typename Relu,
          typename Softmax, typename Dropout, typename LayerNorm,
          typename Attention>
absl::StatusOr<const void*>
StageLayerOps<Conv2D, MaxPool2D, Dense, Relu, Softmax, Dropout, LayerNorm,
              Attention>::Forward(const StagePlan& p,
                                  absl::Span<const void* const> inputs,
                                  absl::Span<const float* const> weights,
                                  uint64_t weights_version,
                                  const DropoutStep* dropout_step, float* y) {
  auto weight = [&](int index) { return StageVariable(weights, index); };
  auto input = [&](size_t k) { return static_cast<const float*>(inputs[k]); };
  const float* x = input(0);
  absl::Status status = absl::InternalError("not a layer op's stage");
  switch (p.kind) {
    case StageKind::kConv2D:
      status = conv->Forward(x, weight(p.kernel), weights_version,
                             weight(p.bias), y);
      break;
    case StageKind::kMaxPool2D:
      status = pool->Forward(x, y);
      break;
    case StageKind::kDense:
      status = dense->Forward(x, weight(p.kernel), weight(p.bias), y);
      break;
    case StageKind::kRelu:
      status = relu->Forward(x, y);
      break;
    case StageKind::kSoftmax:
      status = softmax->Forward(x, y);
      break;
    case StageKind::kDropout: {
      // Inference: the identity; the input passes on untouched.
      if (dropout_step == nullptr) return inputs[0];
      cpu::DropoutKey key;
      key.seed = p.dropout_seed;
      key.step = static_cast<uint64_t>(dropout_step->step);
      key.offset =
          DropoutElementOffset(dropout_step->example_offset, p.in_size);
      status = dropout->Forward(x, key, y);
      break;
    }
    case StageKind::kLayerNormalization:
      status = layer_norm->Forward(x, weight(p.kernel), weight(p.bias), y);
      break;
    case StageKind::kMultiHeadAttention: {
      const float* value = input(1);
      const float* key = inputs.size() > 2 ? input(2) : value;
      status = attention->Forward(x, key, value,
                                  StageAttentionWeights(p, weights), y);
      break;
    }
    default:
      break;
  }
  if (!status.ok()) return InLayer(p.layer, status);
  return y;
}

template <typename Conv2D, typename MaxPool2D, typename Dense, typename Relu,
          typename Softmax, typename Dropout, typename LayerNorm,
          typename Attention>
absl::Status
StageLayerOps<Conv2D, MaxPool2D, Dense, Relu, Softmax, Dropout, LayerNorm,
              Attention>::Backward(const StagePlan& p,
                                   absl::Span<const void* const> inputs,
                                   const float* y, float* dy,
                                   absl::Span<float* const> dx,
                                   absl::Span<const float* const> weights,
                                   uint64_t weights_version,
                                   absl::Span<float* const> gradients) {
  auto weight = [&](int index) { return StageVariable(weights, index); };
  auto gradient = [&](int index) { return StageVariable(gradients, index); };
  auto input = [&](size_t k) { return static_cast<const float*>(inputs[k]); };
  const float* x = input(0);
  float* dx0 = dx[0];
  absl::Status status = absl::InternalError("not a layer op's stage");
  switch (p.kind) {
    case StageKind::kConv2D:
      status = absl::OkStatus();
      if (relu != nullptr) status = relu->Backward(y, dy, dy);
      if (!status.ok()) break;
      status = conv->Backward(x, weight(p.kernel), weights_version, dy, dx0,
                              gradient(p.kernel), gradient(p.bias));
      break;
    case StageKind::kMaxPool2D:
      status = pool->Backward(dy, dx0);
      break;
    case StageKind::kDense:
      status = dense->Backward(x, weight(p.kernel), dy, dx0, gradient(p.kernel),
                               gradient(p.bias));
      break;
    case StageKind::kRelu:
      status = relu->Backward(y, dy, dx0);
      break;
    case StageKind::kSoftmax:
      status = softmax->Backward(y, dy, dx0);
      break;
    case StageKind::kDropout:
      status = dropout->Backward(dy, dx0);
      break;
    case StageKind::kLayerNormalization:
      status = layer_norm->Backward(x, weight(p.kernel), dy, dx0,
                                    gradient(p.kernel), gradient(p.bias));
      break;
    case StageKind::kMultiHeadAttention: {
      const float* value = input(1);
      const float* key = inputs.size() > 2 ? input(2) : value;
      status =
          attention->Backward(x, key, value, StageAttentionWeights(p, weights),
                              dy, StageAttentionGradients(p, gradients, dx));
      break;
    }
    default:
      break;
  }
  return InLayer(p.layer, status);
}

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_STAGE_LAYER_OPS_H_
