#include "compute/gpu/graph_stage.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/stage_geometry.h"
#include "compute/rng_tracker.h"
#include "compute/stage_op_shapes.h"

namespace pstrain {
namespace worker {
namespace gpu {
absl::Status GraphStage::Supports(const StagePlan& p) {
  switch (p.kind) {
    case StageKind::kMerge:
      if (p.inputs.size() > static_cast<size_t>(kMaxMergeInputs)) {
        return InLayer(
            p.layer, absl::UnimplementedError(absl::StrCat(
                         "a merge of ", p.inputs.size(),
                         " inputs; the GPU merges at most ", kMaxMergeInputs)));
      }
      return absl::OkStatus();
    case StageKind::kPermute:
      if (p.in_shapes.empty() ||
          p.in_shapes[0].size() > static_cast<size_t>(kMaxPermuteRank) ||
          p.permutation.size() != p.in_shapes[0].size()) {
        return InLayer(
            p.layer,
            absl::UnimplementedError(absl::StrCat(
                "Permute of ", p.in_shapes.empty() ? 0 : p.in_shapes[0].size(),
                " axes; the GPU permutes 1 to ", kMaxPermuteRank)));
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

absl::StatusOr<std::unique_ptr<GraphStage>> GraphStage::Create(StagePlan plan,
                                                               int64_t batch,
                                                               Device* device) {
  if (device == nullptr) {
    return absl::InvalidArgumentError("GraphStage: a device is required");
  }
  PSTRAIN_RETURN_IF_ERROR(Supports(plan));
  std::unique_ptr<GraphStage> stage(
      new GraphStage(std::move(plan), batch, device));
  GraphStage& s = *stage;
  const StagePlan& p = s.plan_;
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      status = TakeOp(
          p.layer, EmbeddingOp::Create(StageEmbeddingShape(p, batch), device),
          &s.embedding_);
      break;
    case StageKind::kConv2D:
      status =
          TakeOp(p.layer, Conv2DOp::Create(StageConv2DShape(p, batch), device),
                 &s.ops_.conv);
      break;
    case StageKind::kMaxPool2D:
      status = TakeOp(p.layer,
                      MaxPool2DOp::Create(StagePool2DShape(p, batch), device),
                      &s.ops_.pool);
      break;
    case StageKind::kDense:
      status =
          TakeOp(p.layer, DenseOp::Create(StageDenseShape(p, batch), device),
                 &s.ops_.dense);
      break;
    case StageKind::kRelu:
      status = TakeOp(p.layer, ReluOp::Create(batch * p.in_size, device),
                      &s.ops_.relu);
      break;
    case StageKind::kSoftmax:
      status = TakeOp(p.layer,
                      SoftmaxOp::Create(StageSoftmaxShape(p, batch), device),
                      &s.ops_.softmax);
      break;
    case StageKind::kDropout:
      status = TakeOp(
          p.layer, DropoutOp::Create(batch * p.in_size, p.dropout_rate, device),
          &s.ops_.dropout);
      break;
    case StageKind::kActivation:
    case StageKind::kMerge:
    case StageKind::kConcatenate:
    case StageKind::kRescaling:
    case StageKind::kPermute:
    case StageKind::kZeroPadding2D:
    case StageKind::kAveragePooling2D:
    case StageKind::kGlobalPooling:
      status = InLayer(p.layer, s.InitKernelStage());
      break;
    case StageKind::kBatchNormalization:
      status = TakeOp(
          p.layer, BatchNormOp::Create(StageBatchNormShape(p, batch), device),
          &s.batch_norm_);
      break;
    case StageKind::kLayerNormalization:
      status = TakeOp(
          p.layer, LayerNormOp::Create(StageLayerNormShape(p, batch), device),
          &s.ops_.layer_norm);
      break;
    case StageKind::kMultiHeadAttention:
      status = TakeOp(
          p.layer, AttentionOp::Create(StageAttentionShape(p, batch), device),
          &s.ops_.attention);
      break;
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  return stage;
}

absl::Status GraphStage::InitKernelStage() {
  const StagePlan& p = plan_;
  switch (p.kind) {
    case StageKind::kActivation: {
      const Activation a = p.activation.activation;
      axiswise_ = a == Activation::kSoftmax || a == Activation::kLogSoftmax;
      if (axiswise_) return absl::OkStatus();
      PSTRAIN_ASSIGN_OR_RETURN(pointwise_, PointwiseParamsOf(p.activation));
      return absl::OkStatus();
    }
    case StageKind::kMerge:
      merge_ = MergeKindOf(p.merge);
      return absl::OkStatus();
    case StageKind::kConcatenate:
      for (const int64_t size : p.in_sizes) {
        concat_widths_.push_back(size / p.concat_rows);
      }
      return absl::OkStatus();
    case StageKind::kPermute:  // Supports checks the rank.
      permute_forward_ = TransposeGeometry(p.in_shapes[0], p.permutation);
      permute_backward_ =
          InverseTransposeGeometry(p.in_shapes[0], p.permutation);
      return absl::OkStatus();
    case StageKind::kZeroPadding2D:
      padding_ = ZeroPaddingGeometry(p.in_shapes[0], p.pad_top, p.pad_bottom,
                                     p.pad_left, p.pad_right);
      return absl::OkStatus();
    case StageKind::kAveragePooling2D: {
      PSTRAIN_ASSIGN_OR_RETURN(avg_pool_, AvgPoolGeometryOf(p.pool, batch_));
      return absl::OkStatus();
    }
    case StageKind::kGlobalPooling:
      global_channels_ = p.in_shapes[0].back();
      global_steps_ = p.in_size / global_channels_;
      return absl::OkStatus();
    default:
      return absl::OkStatus();  // Rescaling needs nothing.
  }
}

absl::Status GraphStage::BeginPass() { return device_->MakeCurrent(); }

absl::Status GraphStage::OwnForward(const StageCall& call, float* y) {
  const StagePlan& p = plan_;
  auto weight = [&](int index) { return StageVariable(call.weights, index); };
  const float* x = static_cast<const float*>(call.inputs[0]);
  const cudaStream_t stream = device_->stream();
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      status = embedding_->Forward(static_cast<const int32_t*>(call.inputs[0]),
                                   weight(p.kernel), y);
      break;
    case StageKind::kActivation: {
      const cpu::ActivationShape& a = p.activation;
      status = CudaStatus(
          axiswise_ ? LaunchAxisSoftmaxForward(
                          x, a.outer * batch_, a.axis, a.inner,
                          a.activation == Activation::kLogSoftmax, y, stream)
                    : LaunchPointwiseForward(pointwise_, x, batch_ * p.in_size,
                                             y, stream),
          "activation forward");
      break;
    }
    case StageKind::kMerge:
    case StageKind::kConcatenate:
      status = MergeForward(call.inputs, y);
      break;
    case StageKind::kRescaling:
      status = CudaStatus(LaunchScaleShift(x, batch_ * p.out_size, p.rescale,
                                           p.offset, y, stream),
                          "Rescaling forward");
      break;
    case StageKind::kPermute:
      status = CudaStatus(LaunchPermute(x, batch_, permute_forward_, y, stream),
                          "Permute forward");
      break;
    case StageKind::kZeroPadding2D:
      status = CudaStatus(LaunchPadNhwc(x, batch_, padding_, 0.0f, y, stream),
                          "ZeroPadding2D forward");
      break;
    case StageKind::kAveragePooling2D:
      status = CudaStatus(LaunchAvgPoolForward(x, avg_pool_, y, stream),
                          "AveragePooling2D forward");
      break;
    case StageKind::kGlobalPooling:
      status = CudaStatus(
          LaunchGlobalPoolForward(x, batch_, global_steps_, global_channels_,
                                  p.global_max, y, stream),
          "global pooling forward");
      break;
    case StageKind::kBatchNormalization:
      if (call.dropout != nullptr) {  // Training: the batch's statistics.
        status = batch_norm_->ForwardTraining(
            x, weight(p.kernel), weight(p.bias), y, nullptr, nullptr);
      } else {
        status = batch_norm_->ForwardInference(
            x, weight(p.kernel), weight(p.bias), weight(p.moving_mean),
            weight(p.moving_variance), y);
      }
      break;
    default:  // LayerOps'.
      break;
  }
  return status;
}

absl::Status GraphStage::MergeForward(absl::Span<const void* const> inputs,
                                      float* y) {
  const StagePlan& p = plan_;
  const cudaStream_t stream = device_->stream();
  if (p.kind == StageKind::kMerge) {
    MergeInputs in;
    in.count = static_cast<int>(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) {
      in.x[k] = static_cast<const float*>(inputs[k]);
    }
    return CudaStatus(
        LaunchMergeForward(merge_, in, batch_ * p.out_size, y, stream),
        "merge forward");
  }
  // Concatenate: each input's rows into its columns of y's rows.
  const int64_t rows = batch_ * p.concat_rows;
  int64_t row = 0;
  for (const int64_t width : concat_widths_) row += width;
  int64_t offset = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const size_t width = concat_widths_[k] * sizeof(float);
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy2DAsync(y + offset, row * sizeof(float), inputs[k], width,
                          width, rows, cudaMemcpyDeviceToDevice, stream),
        "Concatenate forward: cudaMemcpy2DAsync"));
    offset += concat_widths_[k];
  }
  return absl::OkStatus();
}

absl::Status GraphStage::MergeBackward(absl::Span<const void* const> inputs,
                                       const float* dy,
                                       absl::Span<float* const> dx) {
  const StagePlan& p = plan_;
  const cudaStream_t stream = device_->stream();
  MergeInputs in;
  in.count = static_cast<int>(inputs.size());
  for (size_t k = 0; k < inputs.size() && p.kind == StageKind::kMerge; ++k) {
    in.x[k] = static_cast<const float*>(inputs[k]);
  }
  const int64_t rows = batch_ * p.concat_rows;
  int64_t row = 0;
  for (const int64_t width : concat_widths_) row += width;
  int64_t offset = 0;
  for (size_t k = 0; k < dx.size(); ++k) {
    if (dx[k] != nullptr) {
      if (p.kind == StageKind::kMerge) {
        PSTRAIN_RETURN_IF_ERROR(
            CudaStatus(LaunchMergeBackward(merge_, in, dy, batch_ * p.out_size,
                                           static_cast<int>(k), dx[k], stream),
                       "merge backward"));
      } else {
        const size_t width = concat_widths_[k] * sizeof(float);
        PSTRAIN_RETURN_IF_ERROR(CudaStatus(
            cudaMemcpy2DAsync(dx[k], width, dy + offset, row * sizeof(float),
                              width, rows, cudaMemcpyDeviceToDevice, stream),
            "Concatenate backward: cudaMemcpy2DAsync"));
      }
    }
    if (p.kind == StageKind::kConcatenate) offset += concat_widths_[k];
  }
  return absl::OkStatus();
}

bool GraphStage::SkipsBackward(absl::Span<float* const> dx) const {
  if (dx[0] != nullptr) return false;
  switch (plan_.kind) {
    case StageKind::kEmbedding:
    case StageKind::kConv2D:
    case StageKind::kDense:
    case StageKind::kBatchNormalization:
    case StageKind::kLayerNormalization:
    case StageKind::kMultiHeadAttention:
    case StageKind::kMerge:
    case StageKind::kConcatenate:
      return false;
    default:
      return true;
  }
}

absl::Status GraphStage::OwnBackward(const StageCall& call) {
  const StagePlan& p = plan_;
  const float* x = static_cast<const float*>(call.inputs[0]);
  const float* y = call.y;
  float* dy = call.dy;
  float* dx0 = call.dx[0];
  auto weight = [&](int index) { return StageVariable(call.weights, index); };
  auto gradient = [&](int index) {
    return StageVariable(call.gradients, index);
  };
  const cudaStream_t stream = device_->stream();
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      status = embedding_->Backward(static_cast<const int32_t*>(call.inputs[0]),
                                    dy, gradient(p.kernel));
      break;
    case StageKind::kBatchNormalization:
      status = batch_norm_->Backward(x, weight(p.kernel), dy, dx0,
                                     gradient(p.kernel), gradient(p.bias));
      // The moving statistics take the batch's, summed over its examples
      // as gradients are (the ps averages them over the step's).
      if (status.ok()) {
        status = batch_norm_->ScaledStatistics(static_cast<float>(batch_),
                                               gradient(p.moving_mean),
                                               gradient(p.moving_variance));
      }
      break;
    case StageKind::kActivation: {
      const cpu::ActivationShape& a = p.activation;
      status = CudaStatus(
          axiswise_ ? LaunchAxisSoftmaxBackward(
                          y, dy, a.outer * batch_, a.axis, a.inner,
                          a.activation == Activation::kLogSoftmax, dx0, stream)
                    : LaunchPointwiseBackward(pointwise_, x, y, dy,
                                              batch_ * p.in_size, dx0, stream),
          "activation backward");
      break;
    }
    case StageKind::kMerge:
    case StageKind::kConcatenate:
      status = MergeBackward(call.inputs, dy, call.dx);
      break;
    case StageKind::kRescaling:
      status = CudaStatus(LaunchScaleShift(dy, batch_ * p.in_size, p.rescale,
                                           0.0f, dx0, stream),
                          "Rescaling backward");
      break;
    case StageKind::kPermute:
      status =
          CudaStatus(LaunchPermute(dy, batch_, permute_backward_, dx0, stream),
                     "Permute backward");
      break;
    case StageKind::kZeroPadding2D:
      status = CudaStatus(LaunchCropNhwc(dy, batch_, padding_, dx0, stream),
                          "ZeroPadding2D backward");
      break;
    case StageKind::kAveragePooling2D:
      status = CudaStatus(LaunchAvgPoolBackward(dy, avg_pool_, dx0, stream),
                          "AveragePooling2D backward");
      break;
    case StageKind::kGlobalPooling:
      status = CudaStatus(
          LaunchGlobalPoolBackward(x, y, dy, batch_, global_steps_,
                                   global_channels_, p.global_max, dx0, stream),
          "global pooling backward");
      break;
    default:  // LayerOps'.
      break;
  }
  return status;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
