#include "compute/cpu/graph_stage.h"

#include <string>
#include <utility>

#include "common/status_macros.h"
#include "compute/cpu/embedding.h"
#include "compute/cpu/merge.h"
#include "compute/cpu/window.h"
#include "compute/stage_op_shapes.h"

namespace pstrain {
namespace worker {
namespace cpu {

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
      s.embedding_ = StageEmbeddingShape(p, batch);
      break;
    case StageKind::kConv2D: {
      Conv2DShape shape = StageConv2DShape(p, batch);
      shape.bf16 = engine->bf16();
      status = TakeOp(layer, Conv2DOp::Create(shape, engine), &s.ops_.conv);
      if (status.ok() && shape.fuse_relu) {
        // The convolution applies the ReLU; its backward runs here.
        status = TakeOp(layer, ReluOp::Create(batch * p.out_size, engine),
                        &s.ops_.relu);
      }
      break;
    }
    case StageKind::kMaxPool2D:
      status =
          TakeOp(layer, MaxPool2DOp::Create(StagePool2DShape(p, batch), engine),
                 &s.ops_.pool);
      break;
    case StageKind::kDense: {
      DenseShape shape = StageDenseShape(p, batch);
      shape.bf16 = engine->bf16();
      status = TakeOp(layer, DenseOp::Create(shape, engine), &s.ops_.dense);
      break;
    }
    case StageKind::kRelu:
      status = TakeOp(layer, ReluOp::Create(batch * p.in_size, engine),
                      &s.ops_.relu);
      break;
    case StageKind::kSoftmax:
      status =
          TakeOp(layer, SoftmaxOp::Create(StageSoftmaxShape(p, batch), engine),
                 &s.ops_.softmax);
      break;
    case StageKind::kDropout:
      status =
          TakeOp(layer, DropoutOp::Create(batch * p.in_size, p.dropout_rate),
                 &s.ops_.dropout);
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
      const BatchNormShape shape = StageBatchNormShape(p, batch);
      s.batch_mean_.resize(shape.channels);
      s.batch_variance_.resize(shape.channels);
      status =
          TakeOp(layer, BatchNormOp::Create(shape, engine), &s.batch_norm_);
      break;
    }
    case StageKind::kLayerNormalization:
      status = TakeOp(
          layer, LayerNormOp::Create(StageLayerNormShape(p, batch), engine),
          &s.ops_.layer_norm);
      break;
    case StageKind::kAveragePooling2D:
      status =
          TakeOp(layer, AvgPool2DOp::Create(StagePool2DShape(p, batch), engine),
                 &s.avg_pool_);
      break;
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
    case StageKind::kMultiHeadAttention:
      status = TakeOp(
          layer, AttentionOp::Create(StageAttentionShape(p, batch), engine),
          &s.ops_.attention);
      break;
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  return stage;
}

absl::Status GraphStage::OwnForward(const StageCall& call, float* y) {
  const StagePlan& p = plan_;
  absl::Span<const void* const> inputs = call.inputs;
  auto weight = [&](int index) { return StageVariable(call.weights, index); };
  auto input = [&](size_t k) { return static_cast<const float*>(inputs[k]); };
  const float* x = input(0);
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      status =
          EmbeddingForward(embedding_, static_cast<const int32_t*>(inputs[0]),
                           weight(p.kernel), y);
      break;
    case StageKind::kActivation:
      status = activation_->Forward(x, y);
      break;
    case StageKind::kBatchNormalization:
      if (call.dropout != nullptr) {  // Training: the batch's statistics.
        status = batch_norm_->ForwardTraining(
            x, weight(p.kernel), weight(p.bias), y, batch_mean_.data(),
            batch_variance_.data());
      } else {
        status = batch_norm_->ForwardInference(
            x, weight(p.kernel), weight(p.bias), weight(p.moving_mean),
            weight(p.moving_variance), y);
      }
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
    default:  // LayerOps'.
      break;
  }
  return status;
}

absl::Status GraphStage::OwnBackward(const StageCall& call) {
  const StagePlan& p = plan_;
  absl::Span<const void* const> inputs = call.inputs;
  absl::Span<float* const> dx = call.dx;
  const float* y = call.y;
  float* dy = call.dy;
  auto weight = [&](int index) { return StageVariable(call.weights, index); };
  auto gradient = [&](int index) {
    return StageVariable(call.gradients, index);
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
    default:  // LayerOps'.
      break;
  }
  return status;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
