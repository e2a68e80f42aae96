#include "compute/layer_plan.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace {

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

class Planner {
 public:
  Planner(const ModelSpec& spec, const LayerPlanOptions& options,
          const RngTracker& rng)
      : spec_(spec), options_(options), rng_(rng) {
    for (size_t i = 0; i < spec.variables.size(); ++i) {
      variable_index_[spec.variables[i].name()] = static_cast<int>(i);
    }
  }

  absl::StatusOr<LayerPlan> Plan();

 private:
  absl::StatusOr<int> FindVariable(const LayerSpec& layer, size_t which) const;
  // The index of variable "<layer>/<suffix>"; -1 when the layer has none.
  int FindNamed(const LayerSpec& layer, absl::string_view suffix) const;
  // The stage of `layer` itself, reading `inputs`; false when it has none.
  absl::StatusOr<bool> LayerStage(const LayerSpec& layer,
                                  const std::vector<TensorRef>& inputs,
                                  StagePlan* stage);
  // Adds the stage of `layer`'s activation on `input` (its pre-activation,
  // `size` elements per example) unless it is the identity; returns what
  // holds the activation's output. `in_place` when no one else reads input.
  absl::StatusOr<TensorRef> AddActivation(const LayerSpec& layer,
                                          TensorRef input, int64_t size,
                                          bool in_place);
  // Appends `stage`, reading `inputs`; returns its output.
  TensorRef Add(StagePlan stage, std::vector<TensorRef> inputs);
  int64_t Size(const TensorRef& ref) const {
    return ref.model_input ? Product(spec_.inputs[ref.index].shape)
                           : plan_.stages[ref.index].out_size;
  }
  bool Trainable(const TensorRef& ref) const {
    return !ref.model_input && trainable_[ref.index];
  }
  absl::Status CheckEveryStageLeadsToTheOutput() const;

  const ModelSpec& spec_;
  const LayerPlanOptions options_;
  const RngTracker& rng_;
  std::map<std::string, int> variable_index_;
  LayerPlan plan_;
  // Per stage: it or a stage before it has variables.
  std::vector<bool> trainable_;
  // The layer being planned is the model's output, read by no other layer.
  bool final_ = false;
};

absl::StatusOr<int> Planner::FindVariable(const LayerSpec& layer,
                                          size_t which) const {
  if (which >= layer.variables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "' lacks variable ", which));
  }
  auto it = variable_index_.find(layer.variables[which]);
  if (it == variable_index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", layer.name, "': variable '", layer.variables[which],
        "' is not among the model's variables"));
  }
  return it->second;
}

int Planner::FindNamed(const LayerSpec& layer, absl::string_view suffix) const {
  auto it = variable_index_.find(absl::StrCat(layer.name, "/", suffix));
  return it == variable_index_.end() ? -1 : it->second;
}

TensorRef Planner::Add(StagePlan stage, std::vector<TensorRef> inputs) {
  stage.in_sizes.clear();
  stage.input_needs_dx.clear();
  bool trainable = stage.has_variables();
  for (const TensorRef& input : inputs) {
    stage.in_sizes.push_back(Size(input));
    stage.input_needs_dx.push_back(Trainable(input));
    stage.needs_dx = stage.needs_dx || Trainable(input);
    trainable = trainable || Trainable(input);
  }
  stage.in_size = stage.in_sizes[0];
  stage.inputs = std::move(inputs);
  const int index = static_cast<int>(plan_.stages.size());
  if (stage.has_variables() && plan_.first_trainable < 0) {
    plan_.first_trainable = index;
  }
  plan_.stages.push_back(std::move(stage));
  trainable_.push_back(trainable);
  return TensorRef{false, index};
}

absl::StatusOr<TensorRef> Planner::AddActivation(const LayerSpec& layer,
                                                 TensorRef input, int64_t size,
                                                 bool in_place) {
  const Activation activation = layer.activation;
  const ActivationParams& params = layer.activation_params;
  const std::vector<int64_t>& shape = layer.output_shape;
  const bool last_axis = params.axis + 1 == static_cast<int>(shape.size());
  if (activation == Activation::kLinear) return input;
  StagePlan stage;
  stage.layer = layer.name;
  stage.out_size = size;
  if (activation == Activation::kSoftmax && last_axis) {
    if (final_ && options_.drop_final_softmax) return input;
    const int64_t classes = shape.empty() ? 1 : shape.back();
    stage.kind = StageKind::kSoftmax;
    stage.softmax.batch = size / classes;
    stage.softmax.classes = classes;
  } else if (activation == Activation::kRelu) {
    stage.kind = StageKind::kRelu;
    // After Conv2D or Dense no one needs the pre-activation: ReLU overwrites
    // it. ReLU's backward reads only its output.
    stage.in_place = in_place;
  } else {
    stage.kind = StageKind::kActivation;
    cpu::ActivationShape& a = stage.activation;
    a.activation = activation;
    a.params = params;
    if (activation == Activation::kSoftmax ||
        activation == Activation::kLogSoftmax) {
      for (int d = 0; d < params.axis; ++d) a.outer *= shape[d];
      a.axis = shape[params.axis];
      for (size_t d = params.axis + 1; d < shape.size(); ++d)
        a.inner *= shape[d];
    } else {
      a.axis = size;
    }
  }
  return Add(std::move(stage), {input});
}

absl::StatusOr<bool> Planner::LayerStage(const LayerSpec& layer,
                                         const std::vector<TensorRef>& inputs,
                                         StagePlan* stage) {
  const std::vector<int64_t>& in = layer.input_shape;
  bool trainable_before = false;
  for (const TensorRef& input : inputs) {
    trainable_before = trainable_before || Trainable(input);
  }
  switch (layer.kind) {
    case LayerKind::kFlatten:
    case LayerKind::kActivation:
      return false;
    case LayerKind::kEmbedding: {
      if (!inputs[0].model_input) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer '", layer.name, "': an Embedding must read a model input"));
      }
      stage->kind = StageKind::kEmbedding;
      PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, FindVariable(layer, 0));
      stage->embedding.ids = stage->in_size;
      stage->embedding.input_dim = layer.input_dim;
      stage->embedding.output_dim = layer.output_dim;
      return true;
    }
    case LayerKind::kConv2D: {
      // Conv1D: [steps, channels] as [1, steps, channels].
      const bool one_d = in.size() == 2;
      if (in.size() != 3 && !one_d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer '", layer.name,
            "': Conv2D needs a rank-3 input (Conv1D a rank-2 one)"));
      }
      stage->kind = StageKind::kConv2D;
      PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, FindVariable(layer, 0));
      if (layer.use_bias) {
        PSTRAIN_ASSIGN_OR_RETURN(stage->bias, FindVariable(layer, 1));
      }
      cpu::Conv2DShape& shape = stage->conv;
      shape.batch = 1;
      shape.height = one_d ? 1 : in[0];
      shape.width = in[one_d ? 0 : 1];
      shape.in_channels = in.back();
      shape.out_channels = layer.filters;
      shape.kernel_h = layer.kernel_h;
      shape.kernel_w = layer.kernel_w;
      shape.stride_h = layer.stride_h;
      shape.stride_w = layer.stride_w;
      shape.dilation_h = layer.dilation_h;
      shape.dilation_w = layer.dilation_w;
      shape.groups = layer.groups;
      shape.padding = layer.causal_padding ? cpu::Padding::kCausal
                      : layer.same_padding ? cpu::Padding::kSame
                                           : cpu::Padding::kValid;
      shape.use_bias = layer.use_bias;
      shape.compute_dx = trainable_before;
      shape.fuse_relu =
          options_.fuse_conv_relu && layer.activation == Activation::kRelu;
      return true;
    }
    case LayerKind::kMaxPool2D: {
      if (in.size() != 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer '", layer.name, "': MaxPooling2D needs a rank-3 input"));
      }
      stage->kind = StageKind::kMaxPool2D;
      cpu::Pool2DShape& shape = stage->pool;
      shape.batch = 1;
      shape.height = in[0];
      shape.width = in[1];
      shape.channels = in[2];
      shape.pool_h = layer.kernel_h;
      shape.pool_w = layer.kernel_w;
      shape.stride_h = layer.stride_h;
      shape.stride_w = layer.stride_w;
      shape.padding =
          layer.same_padding ? cpu::Padding::kSame : cpu::Padding::kValid;
      return true;
    }
    case LayerKind::kDense: {
      stage->kind = StageKind::kDense;
      PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, FindVariable(layer, 0));
      if (layer.use_bias) {
        PSTRAIN_ASSIGN_OR_RETURN(stage->bias, FindVariable(layer, 1));
      }
      // On the last axis: each example is in_size / in rows.
      stage->dense.in = in.back();
      stage->dense.out = layer.units;
      stage->dense.batch = stage->in_size / stage->dense.in;
      stage->dense.use_bias = layer.use_bias;
      stage->dense.compute_dx = trainable_before;
      return true;
    }
    case LayerKind::kDropout:
      if (layer.rate == 0) return false;  // The identity, training or not.
      stage->kind = StageKind::kDropout;
      stage->dropout_rate = layer.rate;
      stage->dropout_seed = rng_.GlobalSeed(layer.name);
      return true;
    case LayerKind::kMerge:
      stage->kind = StageKind::kMerge;
      stage->merge = layer.merge;
      return true;
    case LayerKind::kConcatenate:
      stage->kind = StageKind::kConcatenate;
      for (int d = 0; d < layer.axis; ++d) stage->concat_rows *= in[d];
      return true;
    case LayerKind::kReshape:
      return false;  // Row-major: the same elements in the same order.
    case LayerKind::kBatchNormalization:
    case LayerKind::kLayerNormalization:
      stage->kind = layer.kind == LayerKind::kBatchNormalization
                        ? StageKind::kBatchNormalization
                        : StageKind::kLayerNormalization;
      stage->epsilon = layer.epsilon;
      stage->center = layer.center;
      stage->scale = layer.scale;
      stage->kernel = FindNamed(layer, "gamma");
      stage->bias = FindNamed(layer, "beta");
      stage->moving_mean = FindNamed(layer, "moving_mean");
      stage->moving_variance = FindNamed(layer, "moving_variance");
      return true;
    case LayerKind::kAveragePooling2D:
      if (in.size() != 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer '", layer.name, "': AveragePooling2D needs a rank-3 input"));
      }
      stage->kind = StageKind::kAveragePooling2D;
      stage->pool.batch = 1;
      stage->pool.height = in[0];
      stage->pool.width = in[1];
      stage->pool.channels = in[2];
      stage->pool.pool_h = layer.kernel_h;
      stage->pool.pool_w = layer.kernel_w;
      stage->pool.stride_h = layer.stride_h;
      stage->pool.stride_w = layer.stride_w;
      stage->pool.padding =
          layer.same_padding ? cpu::Padding::kSame : cpu::Padding::kValid;
      return true;
    case LayerKind::kGlobalPooling:
      stage->kind = StageKind::kGlobalPooling;
      stage->global_max = layer.global_max;
      return true;
    case LayerKind::kZeroPadding2D:
      stage->kind = StageKind::kZeroPadding2D;
      stage->pad_top = layer.pad_top;
      stage->pad_bottom = layer.pad_bottom;
      stage->pad_left = layer.pad_left;
      stage->pad_right = layer.pad_right;
      return true;
    case LayerKind::kPermute:
      stage->kind = StageKind::kPermute;
      stage->permutation = layer.permutation;
      return true;
    case LayerKind::kRescaling:
      stage->kind = StageKind::kRescaling;
      stage->rescale = layer.rescale;
      stage->offset = layer.offset;
      return true;
    case LayerKind::kMultiHeadAttention:
      stage->kind = StageKind::kMultiHeadAttention;
      stage->heads = layer.num_heads;
      stage->key_dim = layer.key_dim;
      stage->value_dim = layer.value_dim;
      stage->output_dim = layer.attention_output_dim;
      stage->use_bias = layer.use_bias;
      stage->causal = layer.causal;
      for (const char* name : {"query", "key", "value", "attention_output"}) {
        for (const char* part : {"kernel", "bias"}) {
          stage->attention_variables.push_back(
              FindNamed(layer, absl::StrCat(name, "/", part)));
        }
      }
      return true;
  }
  return false;
}

absl::StatusOr<LayerPlan> Planner::Plan() {
  if (spec_.outputs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has ", spec_.outputs.size(), " outputs; one is supported"));
  }
  plan_.num_inputs = static_cast<int>(spec_.inputs.size());
  // Per layer, what holds its output; and how many layers read it.
  std::vector<TensorRef> output_of(spec_.layers.size());
  std::vector<int> readers(spec_.layers.size(), 0);
  for (const LayerSpec& layer : spec_.layers) {
    for (const TensorRef& ref : layer.inputs) {
      if (!ref.model_input) ++readers[ref.index];
    }
  }
  for (size_t li = 0; li < spec_.layers.size(); ++li) {
    const LayerSpec& layer = spec_.layers[li];
    final_ = static_cast<int>(li) == spec_.outputs[0] && readers[li] == 0;
    std::vector<TensorRef> inputs;
    for (const TensorRef& ref : layer.inputs) {
      inputs.push_back(ref.model_input ? ref : output_of[ref.index]);
    }
    StagePlan stage;
    stage.layer = layer.name;
    stage.in_shapes = layer.input_shapes;
    stage.in_size = Product(layer.input_shape);
    stage.out_size = Product(layer.output_shape);
    PSTRAIN_ASSIGN_OR_RETURN(const bool has_stage,
                             LayerStage(layer, inputs, &stage));
    if (layer.kind == LayerKind::kActivation) {
      PSTRAIN_ASSIGN_OR_RETURN(output_of[li],
                               AddActivation(layer, inputs[0], stage.in_size,
                                             /*in_place=*/false));
      continue;
    }
    if (!has_stage) {  // Flatten, Dropout(0): the identity.
      output_of[li] = inputs[0];
      continue;
    }
    const bool fused_relu = stage.conv.fuse_relu;
    const int64_t out_size = stage.out_size;
    output_of[li] = Add(std::move(stage), inputs);
    if ((layer.kind == LayerKind::kConv2D || layer.kind == LayerKind::kDense) &&
        !fused_relu) {
      PSTRAIN_ASSIGN_OR_RETURN(
          output_of[li],
          AddActivation(layer, output_of[li], out_size, /*in_place=*/true));
    }
  }
  const TensorRef output = output_of[spec_.outputs[0]];
  if (output.model_input) {
    return absl::InvalidArgumentError(
        "the model computes nothing: its output is its input");
  }
  plan_.output = output.index;
  plan_.output_size = plan_.stages[output.index].out_size;
  PSTRAIN_RETURN_IF_ERROR(CheckEveryStageLeadsToTheOutput());
  return std::move(plan_);
}

absl::Status Planner::CheckEveryStageLeadsToTheOutput() const {
  std::vector<bool> leads(plan_.stages.size(), false);
  leads[plan_.output] = true;
  for (int i = plan_.output; i >= 0; --i) {
    if (!leads[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", plan_.stages[i].layer,
                       "' does not lead to the model's output"));
    }
    for (const TensorRef& ref : plan_.stages[i].inputs) {
      if (!ref.model_input) leads[ref.index] = true;
    }
  }
  for (size_t i = plan_.output + 1; i < plan_.stages.size(); ++i) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", plan_.stages[i].layer,
                     "' does not lead to the model's output"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<RegularizedVariable> RegularizedVariables(const ModelSpec& spec) {
  std::vector<Regularizer> by_variable(spec.variables.size());
  for (const LayerSpec& layer : spec.layers) {
    if (layer.shares >= 0) continue;
    for (size_t v = 0; v < layer.variables.size() && v < 2; ++v) {
      const Regularizer& r =
          v == 0 ? layer.kernel_regularizer : layer.bias_regularizer;
      if (!r.active()) continue;
      for (size_t i = 0; i < spec.variables.size(); ++i) {
        if (spec.variables[i].name() == layer.variables[v]) by_variable[i] = r;
      }
    }
  }
  std::vector<RegularizedVariable> regularized;
  for (size_t i = 0; i < by_variable.size(); ++i) {
    if (by_variable[i].active()) {
      regularized.push_back({static_cast<int>(i), by_variable[i]});
    }
  }
  return regularized;
}

absl::Status InLayer(const std::string& layer, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("layer '", layer, "': ", status.message()));
}

absl::StatusOr<LayerPlan> PlanLayers(const ModelSpec& spec,
                                     const LayerPlanOptions& options,
                                     const RngTracker& rng) {
  return Planner(spec, options, rng).Plan();
}

}  // namespace worker
}  // namespace pstrain
