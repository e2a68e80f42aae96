#include "worker/gpu/layer_chain.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/gpu/conv2d.h"
#include "worker/gpu/dense.h"
#include "worker/gpu/dropout.h"
#include "worker/gpu/embedding.h"
#include "worker/gpu/max_pool2d.h"
#include "worker/gpu/relu.h"
#include "worker/gpu/softmax.h"

namespace pstrain {
namespace worker {
namespace gpu {
// One stage of the plan with its op and the device buffers it owns.
struct LayerChain::Stage {
  StagePlan plan;

  std::unique_ptr<EmbeddingOp> embedding;
  std::unique_ptr<Conv2DOp> conv;
  std::unique_ptr<MaxPool2DOp> pool;
  std::unique_ptr<DenseOp> dense;
  std::unique_ptr<ReluOp> relu;
  std::unique_ptr<SoftmaxOp> softmax;
  std::unique_ptr<DropoutOp> dropout;

  DeviceBuffer y;  // [batch, out_size] unless in_place.
  DeviceBuffer
      dx;  // [batch, in_size] when a separate input gradient is needed.

  // Set by Forward: what this stage read and wrote.
  const void* x = nullptr;
  float* out = nullptr;
};

LayerChain::LayerChain(int64_t batch, Device* device)
    : batch_(batch), device_(device) {}

LayerChain::~LayerChain() = default;

absl::StatusOr<std::unique_ptr<LayerChain>> LayerChain::Create(
    const ModelSpec& spec, const LayerChainOptions& options,
    const RngTracker& rng, Device* device) {
  if (options.batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerChain: batch must be positive, got ", options.batch));
  }
  if (device == nullptr) {
    return absl::InvalidArgumentError("LayerChain: a device is required");
  }
  LayerPlanOptions plan_options;
  plan_options.drop_final_softmax = options.drop_final_softmax;
  plan_options.fuse_conv_relu = false;  // A ReLU stage in place instead.
  plan_options.chain_only = true;
  PSTRAIN_ASSIGN_OR_RETURN(LayerPlan plan, PlanLayers(spec, plan_options, rng));
  std::unique_ptr<LayerChain> chain(new LayerChain(options.batch, device));
  chain->output_size_ = plan.output_size;
  chain->first_trainable_ = plan.first_trainable;
  for (StagePlan& stage_plan : plan.stages) {
    PSTRAIN_RETURN_IF_ERROR(chain->AddStage(std::move(stage_plan)));
  }
  PSTRAIN_RETURN_IF_ERROR(chain->AllocateBuffers());
  return chain;
}

absl::Status LayerChain::AddStage(StagePlan plan) {
  auto stage = std::make_unique<Stage>();
  Stage& s = *stage;
  s.plan = std::move(plan);
  const StagePlan& p = s.plan;
  const std::string& layer = p.layer;
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding: {
      EmbeddingShape shape = p.embedding;
      shape.ids *= batch_;
      status = TakeOp(layer, EmbeddingOp::Create(shape, device_), &s.embedding);
      break;
    }
    case StageKind::kConv2D: {
      Conv2DShape shape = p.conv;
      shape.batch = batch_;
      status = TakeOp(layer, Conv2DOp::Create(shape, device_), &s.conv);
      break;
    }
    case StageKind::kMaxPool2D: {
      Pool2DShape shape = p.pool;
      shape.batch = batch_;
      status = TakeOp(layer, MaxPool2DOp::Create(shape, device_), &s.pool);
      break;
    }
    case StageKind::kDense: {
      DenseShape shape = p.dense;
      shape.batch *= batch_;  // Rows: the plan's are per example.
      status = TakeOp(layer, DenseOp::Create(shape, device_), &s.dense);
      break;
    }
    case StageKind::kRelu:
      status =
          TakeOp(layer, ReluOp::Create(batch_ * p.in_size, device_), &s.relu);
      break;
    case StageKind::kSoftmax: {
      SoftmaxShape shape = p.softmax;
      shape.batch *= batch_;
      status = TakeOp(layer, SoftmaxOp::Create(shape, device_), &s.softmax);
      break;
    }
    case StageKind::kDropout:
      status = TakeOp(
          layer, DropoutOp::Create(batch_ * p.in_size, p.dropout_rate, device_),
          &s.dropout);
      break;
    case StageKind::kActivation:
    case StageKind::kMerge:
    case StageKind::kConcatenate:
    case StageKind::kBatchNormalization:
    case StageKind::kLayerNormalization:
    case StageKind::kAveragePooling2D:
    case StageKind::kGlobalPooling:
    case StageKind::kZeroPadding2D:
    case StageKind::kPermute:
    case StageKind::kRescaling:
    case StageKind::kMultiHeadAttention:
      status = InLayer(layer, absl::UnimplementedError(
                                  "not computed on GPU yet (train this model "
                                  "with --device=cpu)"));
      break;
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  stages_.push_back(std::move(stage));
  return absl::OkStatus();
}

absl::Status LayerChain::AllocateBuffers() {
  auto allocate = [&](int64_t floats) {
    return device_->Allocate(floats * static_cast<int64_t>(sizeof(float)));
  };
  for (const std::unique_ptr<Stage>& stage : stages_) {
    if (!stage->plan.in_place) {
      PSTRAIN_ASSIGN_OR_RETURN(stage->y,
                               allocate(batch_ * stage->plan.out_size));
    }
    // ReLU and Dropout compute their input gradient in place.
    const bool separate_dx = stage->plan.kind != StageKind::kRelu &&
                             stage->plan.kind != StageKind::kDropout;
    if (stage->plan.needs_dx && separate_dx) {
      PSTRAIN_ASSIGN_OR_RETURN(stage->dx,
                               allocate(batch_ * stage->plan.in_size));
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(output_gradient_, allocate(batch_ * output_size_));
  return absl::OkStatus();
}

absl::Status LayerChain::Forward(const void* features,
                                 absl::Span<const float* const> weights,
                                 uint64_t weights_version,
                                 const DropoutStep* dropout) {
  if (features == nullptr) {
    return absl::InvalidArgumentError("LayerChain: features are required");
  }
  trained_forward_ = false;
  // The current activation, and whether it is ours to overwrite.
  const void* current = features;
  float* mutable_current = nullptr;
  auto weight = [&](int index) {
    return index >= 0 ? weights[index] : nullptr;
  };
  for (const std::unique_ptr<Stage>& stage_ptr : stages_) {
    Stage& s = *stage_ptr;
    const float* x = static_cast<const float*>(current);
    float* y = s.plan.in_place ? mutable_current : s.y.floats();
    absl::Status status;
    switch (s.plan.kind) {
      case StageKind::kEmbedding:
        status = s.embedding->Forward(static_cast<const int32_t*>(current),
                                      weight(s.plan.kernel), y);
        break;
      case StageKind::kConv2D:
        status = s.conv->Forward(x, weight(s.plan.kernel), weights_version,
                                 weight(s.plan.bias), y);
        break;
      case StageKind::kMaxPool2D:
        status = s.pool->Forward(x, y);
        break;
      case StageKind::kDense:
        status =
            s.dense->Forward(x, weight(s.plan.kernel), weight(s.plan.bias), y);
        break;
      case StageKind::kRelu:
        status = s.relu->Forward(x, y);
        break;
      case StageKind::kSoftmax:
        status = s.softmax->Forward(x, y);
        break;
      case StageKind::kDropout:
        if (dropout == nullptr) {
          // Inference: the identity; pass the input on untouched.
          s.x = current;
          s.out = nullptr;
          continue;
        } else {
          DropoutKey key;
          key.seed = s.plan.dropout_seed;
          key.step = static_cast<uint64_t>(dropout->step);
          key.offset =
              DropoutElementOffset(dropout->example_offset, s.plan.in_size);
          status = s.dropout->Forward(x, key, y);
        }
        break;
      case StageKind::kActivation:
      case StageKind::kMerge:
      case StageKind::kConcatenate:
      case StageKind::kBatchNormalization:
      case StageKind::kLayerNormalization:
      case StageKind::kAveragePooling2D:
      case StageKind::kGlobalPooling:
      case StageKind::kZeroPadding2D:
      case StageKind::kPermute:
      case StageKind::kRescaling:
      case StageKind::kMultiHeadAttention:
        status = absl::InternalError("a stage AddStage refuses");
        break;
    }
    if (!status.ok()) return InLayer(s.plan.layer, status);
    s.x = current;
    s.out = y;
    current = y;
    mutable_current = y;
  }
  output_ = static_cast<const float*>(current);
  trained_forward_ = dropout != nullptr;
  return absl::OkStatus();
}

absl::Status LayerChain::Backward(absl::Span<const float* const> weights,
                                  uint64_t weights_version,
                                  absl::Span<float* const> gradients) {
  if (!trained_forward_) {
    return absl::FailedPreconditionError(
        "LayerChain: Backward needs a training Forward first");
  }
  if (first_trainable_ < 0) return absl::OkStatus();  // Nothing to learn.
  auto weight = [&](int index) {
    return index >= 0 ? weights[index] : nullptr;
  };
  auto gradient = [&](int index) {
    return index >= 0 ? gradients[index] : nullptr;
  };
  // The gradient of the current stage's output; stages write their input's
  // gradient into dx (or in place) and hand it on.
  float* g = output_gradient_.floats();
  for (int i = static_cast<int>(stages_.size()) - 1; i >= first_trainable_;
       --i) {
    Stage& s = *stages_[i];
    const float* x = static_cast<const float*>(s.x);
    float* dx = s.dx.floats();
    absl::Status status;
    switch (s.plan.kind) {
      case StageKind::kEmbedding:
        status = s.embedding->Backward(static_cast<const int32_t*>(s.x), g,
                                       gradient(s.plan.kernel));
        break;
      case StageKind::kConv2D:
        status =
            s.conv->Backward(x, weight(s.plan.kernel), weights_version, g, dx,
                             gradient(s.plan.kernel), gradient(s.plan.bias));
        break;
      case StageKind::kMaxPool2D:
        status = s.pool->Backward(g, dx);
        break;
      case StageKind::kDense:
        status =
            s.dense->Backward(x, weight(s.plan.kernel), g, dx,
                              gradient(s.plan.kernel), gradient(s.plan.bias));
        break;
      case StageKind::kRelu:
        status = s.relu->Backward(s.out, g, g);
        dx = g;
        break;
      case StageKind::kSoftmax:
        status = s.softmax->Backward(s.out, g, dx);
        break;
      case StageKind::kDropout:
        status = s.dropout->Backward(g, g);
        dx = g;
        break;
      case StageKind::kActivation:
      case StageKind::kMerge:
      case StageKind::kConcatenate:
      case StageKind::kBatchNormalization:
      case StageKind::kLayerNormalization:
      case StageKind::kAveragePooling2D:
      case StageKind::kGlobalPooling:
      case StageKind::kZeroPadding2D:
      case StageKind::kPermute:
      case StageKind::kRescaling:
      case StageKind::kMultiHeadAttention:
        status = absl::InternalError("a stage AddStage refuses");
        break;
    }
    if (!status.ok()) return InLayer(s.plan.layer, status);
    g = dx;
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
