#include "compute/backend.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

absl::string_view LossKindName(LossKind kind) {
  switch (kind) {
    case LossKind::kSparseCrossEntropy:
      return "sparse_categorical_crossentropy";
    case LossKind::kMeanSquaredError:
      return "mse";
    case LossKind::kCategoricalCrossEntropy:
      return "categorical_crossentropy";
    case LossKind::kBinaryCrossEntropy:
      return "binary_crossentropy";
    case LossKind::kMeanAbsoluteError:
      return "mae";
    case LossKind::kHuber:
      return "huber";
  }
  return "unknown loss";
}

absl::Status CheckStepInput(absl::string_view backend, const StepInput& input,
                            int64_t max_batch) {
  if (input.batch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, ": batch must be >= 0, got ", input.batch));
  }
  if (max_batch > 0 && input.batch > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, ": batch ", input.batch, " exceeds max_batch ", max_batch));
  }
  if (input.batch > 0 &&
      (input.features == nullptr || input.labels == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, ": features and labels are required"));
  }
  if (input.example_offset < 0 || input.step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, ": step and example_offset must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckVariableTensor(absl::string_view backend,
                                 absl::string_view what, const VariableDef& def,
                                 const Tensor* tensor) {
  if (tensor == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, ": ", what, " '", def.name(), "' is missing"));
  }
  const std::vector<int64_t> shape(def.shape().dims().begin(),
                                   def.shape().dims().end());
  if (tensor->dtype() != DT_FLOAT || tensor->shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, ": ", what, " '", def.name(), "' is ",
        DataTypeName(tensor->dtype()), " ", ShapeString(tensor->shape()),
        ", expected float32 ", ShapeString(shape)));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain
