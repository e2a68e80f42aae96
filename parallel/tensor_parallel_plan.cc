#include "parallel/tensor_parallel_plan.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::Activation;
using worker::LayerKind;
using worker::LayerSpec;
using worker::ModelSpec;

absl::Status LayerError(const LayerSpec& layer, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("tensor parallel: layer '", layer.name, "': ", problem));
}

// Layers that act on each element alone, so a column slice of their input
// gives the same columns of their output.
bool Elementwise(const LayerSpec& layer) {
  switch (layer.kind) {
    case LayerKind::kDropout:
      return true;
    case LayerKind::kActivation:
      return layer.activation != Activation::kSoftmax &&
             layer.activation != Activation::kLogSoftmax;
    default:
      return false;
  }
}

int SplitDim(const VariableSplits& splits, const std::string& name) {
  auto it = splits.find(name);
  return it == splits.end() ? -1 : it->second.split_dim;
}

// Refuses a model that is not a chain: one input, each layer reading the
// one before it, the last layer the one output.
absl::Status CheckChain(const ModelSpec& spec) {
  if (spec.inputs.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor parallel: the model has ", spec.inputs.size(),
        " inputs; this version splits a chain of layers with one input"));
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& layer = spec.layers[i];
    const worker::TensorRef previous{/*model_input=*/i == 0,
                                     /*index=*/i == 0 ? 0 : int(i) - 1};
    if (layer.inputs.size() != 1 || !(layer.inputs[0] == previous)) {
      return LayerError(layer,
                        "does not read the layer before it; this version "
                        "splits a chain of layers");
    }
  }
  if (spec.outputs.size() != 1 ||
      spec.outputs[0] != static_cast<int>(spec.layers.size()) - 1) {
    return absl::InvalidArgumentError(
        "tensor parallel: the model's output is not its last layer; this "
        "version splits a chain of layers");
  }
  return absl::OkStatus();
}

// The form of Dense `layer`, from its variables' splits.
absl::StatusOr<ParallelForm> DenseForm(const LayerSpec& layer,
                                       const VariableSplits& splits) {
  const std::string& kernel = layer.variables[0];
  const int kernel_dim = SplitDim(splits, kernel);
  const int bias_dim =
      layer.use_bias ? SplitDim(splits, layer.variables[1]) : -1;
  if (kernel_dim < 0) {
    if (bias_dim >= 0) {
      return LayerError(layer, absl::StrCat("bias '", layer.variables[1],
                                            "' is split but kernel '", kernel,
                                            "' is not; split the kernel's "
                                            "output dimension with it"));
    }
    return ParallelForm::kReplicated;
  }
  if (layer.input_shape.size() != 1) {
    return LayerError(
        layer, absl::StrCat("kernel '", kernel, "' is split, but the Dense ",
                            "reads an input of rank ", layer.input_shape.size(),
                            " per example; this version splits Dense layers on "
                            "rank-1 inputs"));
  }
  if (layer.shares >= 0) {
    return LayerError(layer, absl::StrCat("kernel '", kernel,
                                          "' is split, but the layer is "
                                          "shared (called twice)"));
  }
  if (kernel_dim == 1) {
    if (layer.use_bias && bias_dim != 0) {
      return LayerError(layer,
                        absl::StrCat("kernel '", kernel,
                                     "' is split on its output dimension "
                                     "(column-parallel), so bias '",
                                     layer.variables[1],
                                     "' must be split with it, as [\"model\"]"));
    }
    if (layer.activation == Activation::kSoftmax ||
        layer.activation == Activation::kLogSoftmax) {
      return LayerError(layer, absl::StrCat("kernel '", kernel,
                                            "' is split on its output "
                                            "dimension, but the layer's "
                                            "softmax needs the whole output"));
    }
    return ParallelForm::kColumnParallel;
  }
  if (bias_dim >= 0) {
    return LayerError(layer,
                      absl::StrCat("kernel '", kernel,
                                   "' is split on its input dimension "
                                   "(row-parallel), so bias '",
                                   layer.variables[1],
                                   "' must be replicated: it is added once, "
                                   "after the partial outputs are summed"));
  }
  return ParallelForm::kRowParallel;
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

const char* ParallelFormName(ParallelForm form) {
  switch (form) {
    case ParallelForm::kReplicated:
      return "replicated";
    case ParallelForm::kColumnParallel:
      return "column-parallel";
    case ParallelForm::kRowParallel:
      return "row-parallel";
  }
  return "unknown";
}

int64_t MemberVariable::local_elements() const { return Elements(local_shape); }

absl::StatusOr<TensorParallelPlan> PlanTensorParallel(
    const ModelSpec& spec, const VariableSplits& splits, int model_size,
    int member) {
  if (model_size <= 0 || member < 0 || member >= model_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallel: member ", member,
                     " is not in a group of ", model_size));
  }
  TensorParallelPlan plan;
  plan.model_size = model_size;
  plan.member = member;
  bool any_split = false;
  for (const VariableDef& def : spec.variables) {
    auto it = splits.find(def.name());
    if (it == splits.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor parallel: variable '", def.name(), "' has no layout"));
    }
    MemberVariable var;
    var.shape.assign(def.shape().dims().begin(), def.shape().dims().end());
    var.local_shape = var.shape;
    var.split_dim = it->second.split_dim;
    if (var.split()) {
      any_split = true;
      const int64_t part = var.shape[var.split_dim] / model_size;
      var.begin = part * member;
      var.end = var.begin + part;
      var.local_shape[var.split_dim] = part;
    }
    plan.variables.emplace(def.name(), std::move(var));
  }
  if (any_split) {
    absl::Status chain = CheckChain(spec);
    if (!chain.ok()) return chain;
  }

  bool split = false;       // the activation flowing into the next layer
  bool trainable_before = false;
  int64_t split_width = 0;  // the whole width of a split activation
  plan.layers.resize(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& layer = spec.layers[i];
    ParallelLayer& p = plan.layers[i];
    p.needs_input_gradient = trainable_before;
    if (layer.kind == LayerKind::kDense) {
      absl::StatusOr<ParallelForm> form = DenseForm(layer, splits);
      if (!form.ok()) return form.status();
      p.form = *form;
    } else {
      for (const std::string& name : layer.variables) {
        if (SplitDim(splits, name) >= 0) {
          return LayerError(layer,
                            absl::StrCat("variable '", name,
                                         "' is split, but this version "
                                         "splits only Dense layers"));
        }
      }
    }
    p.input_split = split;
    switch (p.form) {
      case ParallelForm::kColumnParallel:
        p.gather_input = split;
        p.output_split = true;
        p.reduce_input_gradient = trainable_before;
        split_width = layer.units;
        break;
      case ParallelForm::kRowParallel:
        p.slice_input = !split;
        p.reduce_output = true;
        p.output_split = false;
        break;
      case ParallelForm::kReplicated:
        if (split && Elementwise(layer)) {
          p.output_split = true;
        } else {
          p.gather_input = split;
        }
        break;
    }
    // Communication per step, in floats per example.
    const int64_t in_width = split ? split_width : 0;
    if (p.gather_input) {
      ++plan.forward_collectives;
      plan.floats_per_example += in_width;
    }
    if (p.reduce_output) {
      ++plan.forward_collectives;
      plan.floats_per_example += layer.units;
    }
    if (p.reduce_input_gradient) {
      ++plan.backward_collectives;
      plan.floats_per_example += layer.input_shape.empty()
                                     ? 0
                                     : Elements(layer.input_shape);
    }
    if (p.slice_input && p.needs_input_gradient) {
      ++plan.backward_collectives;
      plan.floats_per_example += Elements(layer.input_shape);
    }
    split = p.output_split;
    if (!layer.variables.empty()) trainable_before = true;
  }
  if (split) {
    plan.gather_output = true;
    ++plan.forward_collectives;
    plan.floats_per_example += split_width;
  }
  return plan;
}

}  // namespace parallel
}  // namespace pstrain
