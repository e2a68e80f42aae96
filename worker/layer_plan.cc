#include "worker/layer_plan.h"

#include <map>
#include <utility>

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
  // The stage of `layer` itself; false when it has none.
  absl::StatusOr<bool> LayerStage(const LayerSpec& layer, bool is_first,
                                  StagePlan* stage);
  void AddActivation(const LayerSpec& layer, Activation activation,
                     int64_t size, bool is_last, bool in_place);
  void Add(StagePlan stage);

  const ModelSpec& spec_;
  const LayerPlanOptions options_;
  const RngTracker& rng_;
  std::map<std::string, int> variable_index_;
  LayerPlan plan_;
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

void Planner::Add(StagePlan stage) {
  stage.needs_dx = plan_.first_trainable >= 0;
  const bool has_variables = stage.has_variables();
  plan_.stages.push_back(std::move(stage));
  if (has_variables && plan_.first_trainable < 0) {
    plan_.first_trainable = static_cast<int>(plan_.stages.size()) - 1;
  }
}

void Planner::AddActivation(const LayerSpec& layer, Activation activation,
                            int64_t size, bool is_last, bool in_place) {
  if (activation == Activation::kLinear) return;
  if (activation == Activation::kSoftmax && is_last &&
      options_.drop_final_softmax) {
    return;
  }
  StagePlan stage;
  stage.layer = layer.name;
  stage.in_size = size;
  stage.out_size = size;
  if (activation == Activation::kRelu) {
    stage.kind = StageKind::kRelu;
    // After Conv2D or Dense no one needs the pre-activation: ReLU overwrites
    // it. ReLU's backward reads only its output.
    stage.in_place = in_place;
  } else {
    const int64_t classes =
        layer.output_shape.empty() ? 1 : layer.output_shape.back();
    stage.kind = StageKind::kSoftmax;
    stage.softmax.batch = size / classes;
    stage.softmax.classes = classes;
  }
  Add(std::move(stage));
}

absl::StatusOr<bool> Planner::LayerStage(const LayerSpec& layer, bool is_first,
                                         StagePlan* stage) {
  const std::vector<int64_t>& in = layer.input_shape;
  const bool trainable_before = plan_.first_trainable >= 0;
  switch (layer.kind) {
    case LayerKind::kFlatten:
    case LayerKind::kActivation:
      return false;
    case LayerKind::kEmbedding: {
      if (!is_first) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer '", layer.name, "': Embedding must be the first layer"));
      }
      stage->kind = StageKind::kEmbedding;
      PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, FindVariable(layer, 0));
      stage->embedding.ids = stage->in_size;
      stage->embedding.input_dim = layer.input_dim;
      stage->embedding.output_dim = layer.output_dim;
      return true;
    }
    case LayerKind::kConv2D: {
      if (in.size() != 3) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer '", layer.name, "': Conv2D needs a rank-3 input"));
      }
      stage->kind = StageKind::kConv2D;
      PSTRAIN_ASSIGN_OR_RETURN(stage->kernel, FindVariable(layer, 0));
      if (layer.use_bias) {
        PSTRAIN_ASSIGN_OR_RETURN(stage->bias, FindVariable(layer, 1));
      }
      cpu::Conv2DShape& shape = stage->conv;
      shape.batch = 1;
      shape.height = in[0];
      shape.width = in[1];
      shape.in_channels = in[2];
      shape.out_channels = layer.filters;
      shape.kernel_h = layer.kernel_h;
      shape.kernel_w = layer.kernel_w;
      shape.stride_h = layer.stride_h;
      shape.stride_w = layer.stride_w;
      shape.padding =
          layer.same_padding ? cpu::Padding::kSame : cpu::Padding::kValid;
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
      cpu::MaxPool2DShape& shape = stage->pool;
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
      stage->dense.batch = 1;
      stage->dense.in = stage->in_size;
      stage->dense.out = stage->out_size;
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
  }
  return false;
}

// The stages run one after another: every layer must read the one before
// (the first, the model's input) and the last be the output. A graph with
// branches, merges, several inputs or shared layers is refused naming the
// first layer that breaks the chain.
absl::Status ExpectChain(const ModelSpec& spec) {
  constexpr absl::string_view kOnly =
      "only models whose layers form a chain are computed yet (no branches, "
      "merges, several inputs or shared layers)";
  if (spec.inputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", spec.inputs.size(), " inputs: ", kOnly));
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& layer = spec.layers[i];
    const TensorRef previous =
        i == 0 ? TensorRef{true, 0} : TensorRef{false, static_cast<int>(i) - 1};
    if (layer.inputs.size() != 1 || !(layer.inputs[0] == previous)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", layer.name, "' does not read ",
          i == 0 ? "the model's input"
                 : absl::StrCat("layer '", spec.layers[i - 1].name, "'"),
          ": ", kOnly));
    }
    if (layer.shares >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", layer.name,
                       "' is called again (shared weights): ", kOnly));
    }
  }
  if (spec.outputs.size() != 1 ||
      spec.outputs[0] + 1 != static_cast<int>(spec.layers.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model's output is not its last layer: ", kOnly));
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerPlan> Planner::Plan() {
  PSTRAIN_RETURN_IF_ERROR(ExpectChain(spec_));
  plan_.output_size = Product(spec_.output_shape);
  for (size_t li = 0; li < spec_.layers.size(); ++li) {
    const LayerSpec& layer = spec_.layers[li];
    const bool is_last = li + 1 == spec_.layers.size();
    StagePlan stage;
    stage.layer = layer.name;
    stage.in_size = Product(layer.input_shape);
    stage.out_size = Product(layer.output_shape);
    PSTRAIN_ASSIGN_OR_RETURN(bool has_stage,
                             LayerStage(layer, /*is_first=*/li == 0, &stage));
    if (layer.kind == LayerKind::kActivation) {
      AddActivation(layer, layer.activation, stage.in_size, is_last,
                    /*in_place=*/false);
      continue;
    }
    if (!has_stage) continue;
    const bool fused_relu = stage.conv.fuse_relu;
    const int64_t out_size = stage.out_size;
    Add(std::move(stage));
    if ((layer.kind == LayerKind::kConv2D || layer.kind == LayerKind::kDense) &&
        !fused_relu) {
      AddActivation(layer, layer.activation, out_size, is_last,
                    /*in_place=*/true);
    }
  }
  return std::move(plan_);
}

}  // namespace

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
