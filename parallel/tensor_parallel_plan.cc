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

// The form of MultiHeadAttention `layer`: head-parallel when every kernel
// and bias is split by heads (query/key/value kernels [d, heads, dim] on 1,
// their biases [heads, dim] on 0, the output kernel [heads, dim, d] on 0)
// and the output bias is replicated; replicated when nothing is split.
absl::StatusOr<ParallelForm> AttentionForm(const LayerSpec& layer,
                                           const VariableSplits& splits) {
  bool any = false;
  for (const std::string& name : layer.variables) {
    any = any || SplitDim(splits, name) >= 0;
  }
  if (!any) return ParallelForm::kReplicated;
  const std::string prefix = layer.name + "/";
  for (const std::string& name : layer.variables) {
    const std::string part = name.substr(prefix.size());
    int want = -1;
    if (part == "query/kernel" || part == "key/kernel" ||
        part == "value/kernel") {
      want = 1;
    } else if (part == "query/bias" || part == "key/bias" ||
               part == "value/bias" || part == "attention_output/kernel") {
      want = 0;
    }
    const int dim = SplitDim(splits, name);
    if (dim == want) continue;
    return LayerError(
        layer,
        absl::StrCat(
            "variable '", name, "' is ",
            dim < 0 ? std::string("replicated")
                    : absl::StrCat("split on dimension ", dim),
            ", but MultiHeadAttention splits by heads: query/key/value "
            "kernels as [null, \"model\", null], their biases as [\"model\", "
            "null], the output kernel as [\"model\", null, null], the output "
            "bias replicated"));
  }
  return ParallelForm::kHeadParallel;
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
    case ParallelForm::kHeadParallel:
      return "head-parallel";
    case ParallelForm::kVocabParallel:
      return "vocab-parallel";
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
      const int64_t part = var.shape[var.split_dim] / model_size;
      var.begin = part * member;
      var.end = var.begin + part;
      var.local_shape[var.split_dim] = part;
    }
    plan.variables.emplace(def.name(), std::move(var));
  }

  // Per layer: its output is split (on its last axis), and it or a layer
  // before it on a path to it has variables.
  std::vector<bool> split(spec.layers.size(), false);
  std::vector<bool> trainable(spec.layers.size(), false);
  plan.layers.resize(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& layer = spec.layers[i];
    ParallelLayer& p = plan.layers[i];
    int split_inputs = 0;
    for (const worker::TensorRef& ref : layer.inputs) {
      if (ref.model_input) continue;
      p.needs_input_gradient = p.needs_input_gradient || trainable[ref.index];
      if (split[ref.index]) ++split_inputs;
    }
    const bool input_split = split_inputs > 0;
    if (input_split && layer.inputs.size() > 1) {
      return LayerError(layer,
                        "reads a split activation among several inputs; "
                        "this version gathers only a single input");
    }
    if (layer.shares >= 0) {
      for (const std::string& name : layer.variables) {
        if (SplitDim(splits, name) >= 0) {
          return LayerError(layer, absl::StrCat("variable '", name,
                                                "' is split, but the layer is "
                                                "shared (called twice)"));
        }
      }
    }
    switch (layer.kind) {
      case LayerKind::kDense: {
        absl::StatusOr<ParallelForm> form = DenseForm(layer, splits);
        if (!form.ok()) return form.status();
        p.form = *form;
        break;
      }
      case LayerKind::kMultiHeadAttention: {
        absl::StatusOr<ParallelForm> form = AttentionForm(layer, splits);
        if (!form.ok()) return form.status();
        p.form = *form;
        break;
      }
      case LayerKind::kEmbedding: {
        const int dim = SplitDim(splits, layer.variables[0]);
        if (dim == 1) {
          return LayerError(
              layer, absl::StrCat("embeddings '", layer.variables[0],
                                  "' are split on their output dimension; "
                                  "this version splits an Embedding by "
                                  "vocabulary, as [\"model\", null]"));
        }
        if (dim == 0) p.form = ParallelForm::kVocabParallel;
        break;
      }
      default:
        for (const std::string& name : layer.variables) {
          if (SplitDim(splits, name) >= 0) {
            return LayerError(layer,
                              absl::StrCat("variable '", name,
                                           "' is split, but this version "
                                           "splits only Dense, "
                                           "MultiHeadAttention and Embedding "
                                           "layers"));
          }
        }
        break;
    }
    p.input_split = input_split;
    const int64_t in_width =
        layer.input_shape.empty() ? 1 : layer.input_shape.back();
    const int64_t in_rows = Elements(layer.input_shape) / in_width;
    switch (p.form) {
      case ParallelForm::kColumnParallel:
        p.gather_input = input_split;
        p.output_split = true;
        p.reduce_input_gradient = p.needs_input_gradient;
        break;
      case ParallelForm::kRowParallel:
        p.slice_input = !input_split;
        p.reduce_output = true;
        break;
      case ParallelForm::kHeadParallel:
        p.reduce_output = true;
        p.reduce_input_gradient = p.needs_input_gradient;
        break;
      case ParallelForm::kVocabParallel:
        p.reduce_output = true;
        break;
      case ParallelForm::kReplicated:
        if (!input_split) break;
        if (Elementwise(layer)) {
          p.output_split = true;
        } else if (layer.kind == LayerKind::kFlatten ||
                   layer.kind == LayerKind::kReshape) {
          if (layer.input_shape.size() != 1 || layer.output_shape.size() != 1) {
            return LayerError(layer,
                              "reshapes a split activation of rank above 1, "
                              "which this version does not run");
          }
          p.output_split = true;  // The identity on a vector.
        } else {
          p.gather_input = true;
        }
        break;
    }
    // Communication per step, in floats per example.
    const int64_t out_elements = Elements(layer.output_shape);
    if (p.gather_input) {
      ++plan.forward_collectives;
      plan.floats_per_example += in_rows * in_width;
    }
    if (p.reduce_output) {
      ++plan.forward_collectives;
      plan.floats_per_example += out_elements;
    }
    if (p.reduce_input_gradient) {
      for (const auto& shape : layer.input_shapes) {
        ++plan.backward_collectives;
        plan.floats_per_example += Elements(shape);
      }
    }
    if (p.slice_input && p.needs_input_gradient) {
      ++plan.backward_collectives;
      plan.floats_per_example += in_rows * in_width;
    }
    split[i] = p.output_split;
    trainable[i] = p.needs_input_gradient || !layer.variables.empty();
  }
  if (spec.outputs.size() == 1 && split[spec.outputs[0]]) {
    plan.gather_output = true;
    ++plan.forward_collectives;
    plan.floats_per_example += Elements(spec.output_shape);
  }
  return plan;
}

}  // namespace parallel
}  // namespace pstrain
