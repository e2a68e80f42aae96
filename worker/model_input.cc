#include "worker/model_input.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/data/id_features.h"

namespace pstrain {
namespace worker {

absl::Status FitDatasetToModel(const ModelSpec& spec, data::Dataset* dataset) {
  const std::string source =
      dataset->origin.path.empty()
          ? std::string("the dataset")
          : absl::StrCat("'", dataset->origin.path, "'");
  int64_t elements = 1;
  for (int64_t d : spec.input_shape) elements *= d;
  if (dataset->features.row_elements() != elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": examples have ", dataset->features.row_elements(),
        " features, but model '", spec.name, "' takes ", elements, " (shape [",
        absl::StrJoin(spec.input_shape, ", "), "])"));
  }
  if (spec.input_dtype != DT_INT32) {
    if (dataset->features.dtype() == DT_INT32) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": features are int32 ids, but model '", spec.name,
          "' does not start with an Embedding"));
    }
    return absl::OkStatus();
  }
  if (spec.layers.empty() || spec.layers[0].kind != LayerKind::kEmbedding) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", spec.name, "' takes int32 input but does not start with an "
        "Embedding"));
  }
  return data::ConvertFeaturesToIds(spec.layers[0].input_dim, dataset);
}

}  // namespace worker
}  // namespace pstrain
