#include "parallel/member_model.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::LayerKind;
using worker::LayerSpec;

void SplitLastAxis(std::vector<int64_t>* shape, int64_t m) {
  if (!shape->empty()) shape->back() /= m;
}

}  // namespace

absl::StatusOr<worker::ModelSpec> MemberModelSpec(
    const worker::ModelSpec& spec, const TensorParallelPlan& plan) {
  if (plan.layers.size() != spec.layers.size()) {
    return absl::InvalidArgumentError(
        "tensor parallel: the plan is not the model's (its layers)");
  }
  const int64_t m = plan.model_size;
  worker::ModelSpec local = spec;
  for (VariableDef& def : local.variables) {
    auto it = plan.variables.find(def.name());
    if (it == plan.variables.end() ||
        it->second.shape.size() !=
            static_cast<size_t>(def.shape().dims_size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor parallel: the plan is not the model's (variable '",
          def.name(), "')"));
    }
    def.mutable_shape()->clear_dims();
    for (int64_t d : it->second.local_shape) def.mutable_shape()->add_dims(d);
  }
  for (size_t i = 0; i < local.layers.size(); ++i) {
    LayerSpec& layer = local.layers[i];
    const ParallelLayer& p = plan.layers[i];
    switch (p.form) {
      case ParallelForm::kColumnParallel:
        layer.units /= m;
        break;
      case ParallelForm::kRowParallel:
        SplitLastAxis(&layer.input_shape, m);
        SplitLastAxis(&layer.input_shapes[0], m);
        break;
      case ParallelForm::kHeadParallel:
        layer.num_heads /= m;
        break;
      case ParallelForm::kVocabParallel:
        layer.input_dim /= m;
        break;
      case ParallelForm::kReplicated:
        if (p.input_split && !p.gather_input) {
          SplitLastAxis(&layer.input_shape, m);
          SplitLastAxis(&layer.input_shapes[0], m);
        }
        break;
    }
    if (p.output_split) SplitLastAxis(&layer.output_shape, m);
  }
  if (plan.gather_output) SplitLastAxis(&local.output_shape, m);
  return local;
}

}  // namespace parallel
}  // namespace pstrain
