#include "compute/cpu/graph_stage.h"

#include <string>
#include <utility>

#include "common/status_macros.h"
#include "compute/cpu/embedding.h"
#include "compute/cpu/merge.h"
#include "compute/cpu/window.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// The attention layer's variables (StagePlan::attention_variables' order)
// among `values`, one buffer per variable of the model.
template <typename Pointer>
std::vector<Pointer> AttentionBuffers(const StagePlan& p,
                                      absl::Span<Pointer const> values) {
  std::vector<Pointer> out;
  for (const int index : p.attention_variables) {
    out.push_back(index >= 0 ? values[index] : nullptr);
  }
  return out;
}

AttentionWeights AttentionWeightsOf(const StagePlan& p,
                                    absl::Span<const float* const> weights) {
  const std::vector<const float*> w = AttentionBuffers(p, weights);
  AttentionWeights a;
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

}  // namespace

absl::StatusOr<std::unique_ptr<GraphStage>> GraphStage::Create(StagePlan plan,
                                                               int64_t batch,
                                                               Engine* engine) {
  std::unique_ptr<GraphStage> stage(
      new GraphStage(std::move(plan), batch, engine->num_threads()));
  GraphStage& s = *stage;
  const StagePlan& p = s.plan_;
  const std::string& layer = p.layer;
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      s.embedding_ = p.embedding;
      s.embedding_.ids *= batch;
      break;
    case StageKind::kConv2D: {
      Conv2DShape shape = p.conv;
      shape.batch = batch;
      shape.bf16 = engine->bf16();
      status = TakeOp(layer, Conv2DOp::Create(shape, engine), &s.conv_);
      if (status.ok() && shape.fuse_relu) {
        // The convolution applies the ReLU; its backward runs here.
        status =
            TakeOp(layer, ReluOp::Create(batch * p.out_size, engine), &s.relu_);
      }
      break;
    }
    case StageKind::kMaxPool2D: {
      Pool2DShape shape = p.pool;
      shape.batch = batch;
      status = TakeOp(layer, MaxPool2DOp::Create(shape, engine), &s.pool_);
      break;
    }
    case StageKind::kDense: {
      DenseShape shape = p.dense;
      shape.batch *= batch;  // Rows: the plan's are per example.
      shape.bf16 = engine->bf16();
      status = TakeOp(layer, DenseOp::Create(shape, engine), &s.dense_);
      break;
    }
    case StageKind::kRelu:
      status =
          TakeOp(layer, ReluOp::Create(batch * p.in_size, engine), &s.relu_);
      break;
    case StageKind::kSoftmax: {
      SoftmaxShape shape = p.softmax;
      shape.batch *= batch;
      status = TakeOp(layer, SoftmaxOp::Create(shape, engine), &s.softmax_);
      break;
    }
    case StageKind::kDropout:
      status =
          TakeOp(layer, DropoutOp::Create(batch * p.in_size, p.dropout_rate),
                 &s.dropout_);
      break;
    case StageKind::kActivation: {
      ActivationShape shape = p.activation;
      shape.outer *= batch;
      status = TakeOp(layer, ActivationOp::Create(shape), &s.activation_);
      break;
    }
    case StageKind::kMerge:
    case StageKind::kRescaling:
      break;
    case StageKind::kConcatenate:
      for (const int64_t size : p.in_sizes) {
        s.concat_widths_.push_back(size / p.concat_rows);
      }
      break;
    case StageKind::kBatchNormalization: {
      BatchNormShape shape;
      shape.channels = p.in_shapes[0].back();
      shape.rows = batch * (p.in_size / shape.channels);
      shape.epsilon = p.epsilon;
      shape.center = p.center;
      shape.scale = p.scale;
      s.batch_mean_.resize(shape.channels);
      s.batch_variance_.resize(shape.channels);
      status =
          TakeOp(layer, BatchNormOp::Create(shape, engine), &s.batch_norm_);
      break;
    }
    case StageKind::kLayerNormalization: {
      LayerNormShape shape;
      shape.width = p.in_shapes[0].back();
      shape.rows = batch * (p.in_size / shape.width);
      shape.epsilon = p.epsilon;
      shape.center = p.center;
      shape.scale = p.scale;
      status =
          TakeOp(layer, LayerNormOp::Create(shape, engine), &s.layer_norm_);
      break;
    }
    case StageKind::kAveragePooling2D: {
      Pool2DShape shape = p.pool;
      shape.batch = batch;
      status = TakeOp(layer, AvgPool2DOp::Create(shape, engine), &s.avg_pool_);
      break;
    }
    case StageKind::kGlobalPooling: {
      GlobalPoolShape shape;
      shape.batch = batch;
      shape.channels = p.in_shapes[0].back();
      shape.steps = p.in_size / shape.channels;
      shape.mode =
          p.global_max ? GlobalPoolMode::kMax : GlobalPoolMode::kAverage;
      status = TakeOp(layer, GlobalPoolOp::Create(shape), &s.global_pool_);
      break;
    }
    case StageKind::kZeroPadding2D: {
      ZeroPadding2DShape shape;
      shape.batch = batch;
      shape.height = p.in_shapes[0][0];
      shape.width = p.in_shapes[0][1];
      shape.channels = p.in_shapes[0][2];
      shape.top = p.pad_top;
      shape.bottom = p.pad_bottom;
      shape.left = p.pad_left;
      shape.right = p.pad_right;
      status = TakeOp(layer, ZeroPadding2DOp::Create(shape), &s.zero_padding_);
      break;
    }
    case StageKind::kPermute: {
      PermuteShape shape;
      shape.batch = batch;
      shape.in_dims = p.in_shapes[0];
      for (const int d : p.permutation) shape.dims.push_back(d + 1);
      status = TakeOp(layer, PermuteOp::Create(shape, engine), &s.permute_);
      break;
    }
    case StageKind::kMultiHeadAttention: {
      // Inputs query, value and maybe key (default: the value), each
      // [sequence, features].
      const std::vector<int64_t>& q = p.in_shapes[0];
      const std::vector<int64_t>& v = p.in_shapes[1];
      const std::vector<int64_t>& k =
          p.in_shapes.size() > 2 ? p.in_shapes[2] : v;
      AttentionShape shape;
      shape.batch = batch;
      shape.tq = q[0];
      shape.dq = q[1];
      shape.tv = v[0];
      shape.dv = v[1];
      shape.dk = k[1];
      shape.heads = p.heads;
      shape.key_dim = p.key_dim;
      shape.value_dim = p.value_dim;
      shape.output_dim = p.output_dim;
      shape.use_bias = p.use_bias;
      shape.causal = p.causal;
      status = TakeOp(layer, AttentionOp::Create(shape, engine), &s.attention_);
      break;
    }
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  return stage;
}

absl::StatusOr<const void*> GraphStage::Forward(
    absl::Span<const void* const> inputs,
    absl::Span<const float* const> weights, uint64_t weights_version,
    const DropoutStep* dropout, float* y) {
  const StagePlan& p = plan_;
  auto weight = [&](int index) {
    return index >= 0 ? weights[index] : nullptr;
  };
  auto input = [&](size_t k) { return static_cast<const float*>(inputs[k]); };
  const float* x = input(0);
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      status =
          EmbeddingForward(embedding_, static_cast<const int32_t*>(inputs[0]),
                           weight(p.kernel), y);
      break;
    case StageKind::kConv2D:
      status = conv_->Forward(x, weight(p.kernel), weights_version,
                              weight(p.bias), y);
      break;
    case StageKind::kMaxPool2D:
      status = pool_->Forward(x, y);
      break;
    case StageKind::kDense:
      status = dense_->Forward(x, weight(p.kernel), weight(p.bias), y);
      break;
    case StageKind::kRelu:
      status = relu_->Forward(x, y);
      break;
    case StageKind::kSoftmax:
      status = softmax_->Forward(x, y);
      break;
    case StageKind::kDropout: {
      // Inference: the identity; the input passes on untouched.
      if (dropout == nullptr) return inputs[0];
      DropoutKey key;
      key.seed = p.dropout_seed;
      key.step = static_cast<uint64_t>(dropout->step);
      key.offset = DropoutElementOffset(dropout->example_offset, p.in_size);
      status = dropout_->Forward(x, key, y);
      break;
    }
    case StageKind::kActivation:
      status = activation_->Forward(x, y);
      break;
    case StageKind::kBatchNormalization:
      if (dropout != nullptr) {  // Training: the batch's statistics.
        status = batch_norm_->ForwardTraining(
            x, weight(p.kernel), weight(p.bias), y, batch_mean_.data(),
            batch_variance_.data());
      } else {
        status = batch_norm_->ForwardInference(
            x, weight(p.kernel), weight(p.bias), weight(p.moving_mean),
            weight(p.moving_variance), y);
      }
      break;
    case StageKind::kLayerNormalization:
      status = layer_norm_->Forward(x, weight(p.kernel), weight(p.bias), y);
      break;
    case StageKind::kAveragePooling2D:
      status = avg_pool_->Forward(x, y);
      break;
    case StageKind::kGlobalPooling:
      status = global_pool_->Forward(x, y);
      break;
    case StageKind::kZeroPadding2D:
      status = zero_padding_->Forward(x, y);
      break;
    case StageKind::kPermute:
      status = permute_->Forward(x, y);
      break;
    case StageKind::kRescaling:
      for (int64_t i = 0; i < batch_ * p.out_size; ++i) {
        y[i] = x[i] * p.rescale + p.offset;
      }
      break;
    case StageKind::kMultiHeadAttention: {
      const float* value = input(1);
      const float* key = inputs.size() > 2 ? input(2) : value;
      status =
          attention_->Forward(x, key, value, AttentionWeightsOf(p, weights), y);
      break;
    }
    case StageKind::kMerge:
    case StageKind::kConcatenate: {
      std::vector<const float*> xs;
      for (size_t k = 0; k < inputs.size(); ++k) xs.push_back(input(k));
      if (p.kind == StageKind::kMerge) {
        MergeForward(p.merge, xs, batch_ * p.out_size, y, num_threads_);
      } else {
        ConcatForward(xs, concat_widths_, batch_ * p.concat_rows, y);
      }
      break;
    }
  }
  if (!status.ok()) return InLayer(p.layer, status);
  return y;
}

absl::Status GraphStage::Backward(absl::Span<const void* const> inputs,
                                  const float* y, float* dy,
                                  absl::Span<float* const> dx,
                                  absl::Span<const float* const> weights,
                                  uint64_t weights_version,
                                  absl::Span<float* const> gradients) {
  const StagePlan& p = plan_;
  auto weight = [&](int index) {
    return index >= 0 ? weights[index] : nullptr;
  };
  auto gradient = [&](int index) {
    return index >= 0 ? gradients[index] : nullptr;
  };
  auto input = [&](size_t k) { return static_cast<const float*>(inputs[k]); };
  const float* x = input(0);
  float* dx0 = dx[0];
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      status =
          EmbeddingBackward(embedding_, static_cast<const int32_t*>(inputs[0]),
                            dy, gradient(p.kernel));
      break;
    case StageKind::kConv2D:
      if (relu_ != nullptr) status = relu_->Backward(y, dy, dy);
      if (!status.ok()) break;
      status = conv_->Backward(x, weight(p.kernel), weights_version, dy, dx0,
                               gradient(p.kernel), gradient(p.bias));
      break;
    case StageKind::kMaxPool2D:
      status = pool_->Backward(dy, dx0);
      break;
    case StageKind::kDense:
      status = dense_->Backward(x, weight(p.kernel), dy, dx0,
                                gradient(p.kernel), gradient(p.bias));
      break;
    case StageKind::kRelu:
      status = relu_->Backward(y, dy, dx0);
      break;
    case StageKind::kSoftmax:
      status = softmax_->Backward(y, dy, dx0);
      break;
    case StageKind::kDropout:
      status = dropout_->Backward(dy, dx0);
      break;
    case StageKind::kActivation:
      status = activation_->Backward(x, y, dy, dx0);
      break;
    case StageKind::kBatchNormalization:
      status = batch_norm_->Backward(x, weight(p.kernel), dy, dx0,
                                     gradient(p.kernel), gradient(p.bias));
      // The moving statistics take the batch's, summed over its examples
      // as gradients are (the ps averages them over the step's).
      for (size_t c = 0; c < batch_mean_.size(); ++c) {
        gradient(p.moving_mean)[c] = batch_mean_[c] * batch_;
        gradient(p.moving_variance)[c] = batch_variance_[c] * batch_;
      }
      break;
    case StageKind::kLayerNormalization:
      status = layer_norm_->Backward(x, weight(p.kernel), dy, dx0,
                                     gradient(p.kernel), gradient(p.bias));
      break;
    case StageKind::kAveragePooling2D:
      if (dx0 != nullptr) status = avg_pool_->Backward(dy, dx0);
      break;
    case StageKind::kGlobalPooling:
      if (dx0 != nullptr) status = global_pool_->Backward(dy, dx0);
      break;
    case StageKind::kZeroPadding2D:
      if (dx0 != nullptr) status = zero_padding_->Backward(dy, dx0);
      break;
    case StageKind::kPermute:
      if (dx0 != nullptr) status = permute_->Backward(dy, dx0);
      break;
    case StageKind::kRescaling:
      for (int64_t i = 0; dx0 != nullptr && i < batch_ * p.in_size; ++i) {
        dx0[i] = dy[i] * p.rescale;
      }
      break;
    case StageKind::kMultiHeadAttention: {
      const std::vector<float*> dw = AttentionBuffers(p, gradients);
      AttentionGradients grads;
      grads.query_kernel = dw[0];
      grads.query_bias = dw[1];
      grads.key_kernel = dw[2];
      grads.key_bias = dw[3];
      grads.value_kernel = dw[4];
      grads.value_bias = dw[5];
      grads.output_kernel = dw[6];
      grads.output_bias = dw[7];
      grads.query = dx[0];
      grads.value = dx[1];
      // Keras's key defaults to the value: the op sums its gradient there.
      grads.key = dx.size() > 2 ? dx[2] : dx[1];
      const float* value = input(1);
      const float* key = inputs.size() > 2 ? input(2) : value;
      status = attention_->Backward(x, key, value,
                                    AttentionWeightsOf(p, weights), dy, grads);
      break;
    }
    case StageKind::kMerge:
    case StageKind::kConcatenate: {
      std::vector<const float*> xs;
      for (size_t k = 0; k < inputs.size(); ++k) xs.push_back(input(k));
      for (size_t k = 0; k < dx.size(); ++k) {
        if (dx[k] == nullptr) continue;
        if (p.kind == StageKind::kMerge) {
          MergeBackward(p.merge, xs, dy, batch_ * p.out_size,
                        static_cast<int>(k), dx[k], num_threads_);
        } else {
          ConcatBackward(dy, concat_widths_, batch_ * p.concat_rows,
                         static_cast<int>(k), dx[k]);
        }
      }
      break;
    }
  }
  return InLayer(p.layer, status);
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
