#include "worker/gpu/layer_chain.h"

#include <map>
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
namespace {

enum class StageKind {
  kEmbedding,
  kConv2D,
  kMaxPool2D,
  kDense,
  kRelu,
  kSoftmax,
  kDropout,
};

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// `status` with the layer named in front of its message.
absl::Status InLayer(const std::string& layer, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("layer '", layer, "': ", status.message()));
}

// The op an op factory made, or its error with the layer named.
template <typename Op>
absl::Status Take(const std::string& layer, absl::StatusOr<std::unique_ptr<Op>> op,
                  std::unique_ptr<Op>* into) {
  if (!op.ok()) return InLayer(layer, op.status());
  *into = std::move(*op);
  return absl::OkStatus();
}

}  // namespace

// One op of the chain and the device buffers it owns.
struct LayerChain::Stage {
  StageKind kind = StageKind::kRelu;
  std::string layer;     // The Keras layer it computes (part of).
  int64_t in_size = 0;   // Elements per example of its input.
  int64_t out_size = 0;  // ... and of its output.
  int kernel = -1;       // Indices into the weights; -1: none.
  int bias = -1;
  // The output overwrites the input (a ReLU after Conv2D or Dense).
  bool in_place = false;
  // Backward must produce the gradient of the input.
  bool needs_dx = false;

  std::unique_ptr<EmbeddingOp> embedding;
  std::unique_ptr<Conv2DOp> conv;
  std::unique_ptr<MaxPool2DOp> pool;
  std::unique_ptr<DenseOp> dense;
  std::unique_ptr<ReluOp> relu;
  std::unique_ptr<SoftmaxOp> softmax;
  std::unique_ptr<DropoutOp> dropout;
  uint64_t dropout_seed = 0;

  DeviceBuffer y;   // [batch, out_size] unless in_place.
  DeviceBuffer dx;  // [batch, in_size] when a separate input gradient is needed.

  // Set by Forward: what this stage read and wrote.
  const void* x = nullptr;
  float* out = nullptr;

  bool has_variables() const { return kernel >= 0; }
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
  std::unique_ptr<LayerChain> chain(new LayerChain(options.batch, device));
  chain->output_size_ = Product(spec.output_shape);
  PSTRAIN_RETURN_IF_ERROR(
      chain->AddLayers(spec, options.drop_final_softmax, rng));
  PSTRAIN_RETURN_IF_ERROR(chain->AllocateBuffers());
  return chain;
}

absl::Status LayerChain::AddLayers(const ModelSpec& spec,
                                   bool drop_final_softmax,
                                   const RngTracker& rng) {
  std::map<std::string, int> variable_index;
  for (size_t i = 0; i < spec.variables.size(); ++i) {
    variable_index[spec.variables[i].name()] = static_cast<int>(i);
  }
  auto find_variable = [&](const LayerSpec& layer,
                           size_t which) -> absl::StatusOr<int> {
    if (which >= layer.variables.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", layer.name, "' lacks variable ", which));
    }
    auto it = variable_index.find(layer.variables[which]);
    if (it == variable_index.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", layer.name, "': variable '", layer.variables[which],
          "' is not among the model's variables"));
    }
    return it->second;
  };

  for (size_t li = 0; li < spec.layers.size(); ++li) {
    const LayerSpec& layer = spec.layers[li];
    const bool is_last = li + 1 == spec.layers.size();
    const int64_t in_size = Product(layer.input_shape);
    const int64_t out_size = Product(layer.output_shape);
    const bool trainable_before = first_trainable_ >= 0;
    auto stage = std::make_unique<Stage>();
    stage->layer = layer.name;
    stage->in_size = in_size;
    stage->out_size = out_size;
    switch (layer.kind) {
      case LayerKind::kFlatten:
        continue;  // No op: an NHWC activation is the flattened matrix.
      case LayerKind::kEmbedding: {
        if (li != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "layer '", layer.name, "': Embedding must be the first layer"));
        }
        stage->kind = StageKind::kEmbedding;
        PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, find_variable(layer, 0));
        EmbeddingShape shape;
        shape.ids = batch_ * in_size;
        shape.input_dim = layer.input_dim;
        shape.output_dim = layer.output_dim;
        PSTRAIN_RETURN_IF_ERROR(Take(layer.name,
                                     EmbeddingOp::Create(shape, device_),
                                     &stage->embedding));
        break;
      }
      case LayerKind::kConv2D: {
        if (layer.input_shape.size() != 3) {
          return absl::InvalidArgumentError(absl::StrCat(
              "layer '", layer.name, "': Conv2D needs a rank-3 input"));
        }
        stage->kind = StageKind::kConv2D;
        PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, find_variable(layer, 0));
        if (layer.use_bias) {
          PSTRAIN_ASSIGN_OR_RETURN(stage->bias, find_variable(layer, 1));
        }
        Conv2DShape shape;
        shape.batch = batch_;
        shape.height = layer.input_shape[0];
        shape.width = layer.input_shape[1];
        shape.in_channels = layer.input_shape[2];
        shape.out_channels = layer.filters;
        shape.kernel_h = layer.kernel_h;
        shape.kernel_w = layer.kernel_w;
        shape.stride_h = layer.stride_h;
        shape.stride_w = layer.stride_w;
        shape.padding = layer.same_padding ? Padding::kSame : Padding::kValid;
        shape.use_bias = layer.use_bias;
        shape.compute_dx = trainable_before;
        PSTRAIN_RETURN_IF_ERROR(
            Take(layer.name, Conv2DOp::Create(shape, device_), &stage->conv));
        break;
      }
      case LayerKind::kMaxPool2D: {
        if (layer.input_shape.size() != 3) {
          return absl::InvalidArgumentError(absl::StrCat(
              "layer '", layer.name, "': MaxPooling2D needs a rank-3 input"));
        }
        stage->kind = StageKind::kMaxPool2D;
        MaxPool2DShape shape;
        shape.batch = batch_;
        shape.height = layer.input_shape[0];
        shape.width = layer.input_shape[1];
        shape.channels = layer.input_shape[2];
        shape.pool_h = layer.kernel_h;
        shape.pool_w = layer.kernel_w;
        shape.stride_h = layer.stride_h;
        shape.stride_w = layer.stride_w;
        shape.padding = layer.same_padding ? Padding::kSame : Padding::kValid;
        PSTRAIN_RETURN_IF_ERROR(Take(
            layer.name, MaxPool2DOp::Create(shape, device_), &stage->pool));
        break;
      }
      case LayerKind::kDense: {
        stage->kind = StageKind::kDense;
        PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, find_variable(layer, 0));
        if (layer.use_bias) {
          PSTRAIN_ASSIGN_OR_RETURN(stage->bias, find_variable(layer, 1));
        }
        DenseShape shape;
        shape.batch = batch_;
        shape.in = in_size;
        shape.out = out_size;
        shape.use_bias = layer.use_bias;
        shape.compute_dx = trainable_before;
        PSTRAIN_RETURN_IF_ERROR(
            Take(layer.name, DenseOp::Create(shape, device_), &stage->dense));
        break;
      }
      case LayerKind::kDropout: {
        if (layer.rate == 0) continue;  // The identity, training or not.
        stage->kind = StageKind::kDropout;
        stage->dropout_seed = rng.GlobalSeed(layer.name);
        PSTRAIN_RETURN_IF_ERROR(Take(
            layer.name, DropoutOp::Create(batch_ * in_size, layer.rate, device_),
            &stage->dropout));
        break;
      }
      case LayerKind::kActivation:
        PSTRAIN_RETURN_IF_ERROR(AddActivation(layer, layer.activation, in_size,
                                              is_last, drop_final_softmax,
                                              /*in_place=*/false));
        continue;
    }
    stage->needs_dx = trainable_before;
    const bool has_variables = stage->has_variables();
    stages_.push_back(std::move(stage));
    if (has_variables && first_trainable_ < 0) {
      first_trainable_ = static_cast<int>(stages_.size()) - 1;
    }
    if (layer.kind == LayerKind::kConv2D || layer.kind == LayerKind::kDense) {
      PSTRAIN_RETURN_IF_ERROR(AddActivation(layer, layer.activation, out_size,
                                            is_last, drop_final_softmax,
                                            /*in_place=*/true));
    }
  }
  return absl::OkStatus();
}

absl::Status LayerChain::AddActivation(const LayerSpec& layer,
                                       Activation activation, int64_t size,
                                       bool is_last, bool drop_final_softmax,
                                       bool in_place) {
  if (activation == Activation::kLinear) return absl::OkStatus();
  if (activation == Activation::kSoftmax && is_last && drop_final_softmax) {
    return absl::OkStatus();
  }
  auto stage = std::make_unique<Stage>();
  stage->layer = layer.name;
  stage->in_size = size;
  stage->out_size = size;
  stage->needs_dx = first_trainable_ >= 0;
  if (activation == Activation::kRelu) {
    stage->kind = StageKind::kRelu;
    // After Conv2D or Dense no one needs the pre-activation: ReLU overwrites
    // it. ReLU's backward reads only its output.
    stage->in_place = in_place;
    PSTRAIN_RETURN_IF_ERROR(Take(
        layer.name, ReluOp::Create(batch_ * size, device_), &stage->relu));
  } else {
    const int64_t classes =
        layer.output_shape.empty() ? 1 : layer.output_shape.back();
    stage->kind = StageKind::kSoftmax;
    SoftmaxShape shape;
    shape.batch = batch_ * (size / classes);
    shape.classes = classes;
    PSTRAIN_RETURN_IF_ERROR(Take(
        layer.name, SoftmaxOp::Create(shape, device_), &stage->softmax));
  }
  stages_.push_back(std::move(stage));
  return absl::OkStatus();
}

absl::Status LayerChain::AllocateBuffers() {
  auto allocate = [&](int64_t floats) {
    return device_->Allocate(floats * static_cast<int64_t>(sizeof(float)));
  };
  for (const std::unique_ptr<Stage>& stage : stages_) {
    if (!stage->in_place) {
      PSTRAIN_ASSIGN_OR_RETURN(stage->y, allocate(batch_ * stage->out_size));
    }
    // ReLU and Dropout compute their input gradient in place; an Embedding
    // (the first layer) has none.
    const bool separate_dx = stage->kind != StageKind::kRelu &&
                             stage->kind != StageKind::kDropout &&
                             stage->kind != StageKind::kEmbedding;
    if (stage->needs_dx && separate_dx) {
      PSTRAIN_ASSIGN_OR_RETURN(stage->dx, allocate(batch_ * stage->in_size));
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
    float* y = s.in_place ? mutable_current : s.y.floats();
    absl::Status status;
    switch (s.kind) {
      case StageKind::kEmbedding:
        status = s.embedding->Forward(static_cast<const int32_t*>(current),
                                      weight(s.kernel), y);
        break;
      case StageKind::kConv2D:
        status = s.conv->Forward(x, weight(s.kernel), weights_version,
                                 weight(s.bias), y);
        break;
      case StageKind::kMaxPool2D:
        status = s.pool->Forward(x, y);
        break;
      case StageKind::kDense:
        status = s.dense->Forward(x, weight(s.kernel), weight(s.bias), y);
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
          key.seed = s.dropout_seed;
          key.step = static_cast<uint64_t>(dropout->step);
          key.offset = DropoutElementOffset(dropout->example_offset, s.in_size);
          status = s.dropout->Forward(x, key, y);
        }
        break;
    }
    if (!status.ok()) return InLayer(s.layer, status);
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
    switch (s.kind) {
      case StageKind::kEmbedding:
        status = s.embedding->Backward(static_cast<const int32_t*>(s.x), g,
                                       gradient(s.kernel));
        break;
      case StageKind::kConv2D:
        status = s.conv->Backward(x, weight(s.kernel), weights_version, g, dx,
                                  gradient(s.kernel), gradient(s.bias));
        break;
      case StageKind::kMaxPool2D:
        status = s.pool->Backward(g, dx);
        break;
      case StageKind::kDense:
        status = s.dense->Backward(x, weight(s.kernel), g, dx,
                                   gradient(s.kernel), gradient(s.bias));
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
    }
    if (!status.ok()) return InLayer(s.layer, status);
    g = dx;
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
