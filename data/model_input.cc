#include "data/model_input.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/id_features.h"

namespace pstrain {
namespace worker {
namespace {

// Ids above 2^24 are not all exact as float32: a row mixing floats and ids
// (kept as floats) holds only smaller vocabularies.
constexpr int64_t kExactFloatIds = int64_t{1} << 24;

}  // namespace

std::vector<InputColumns> ModelInputColumns(const ModelSpec& spec) {
  std::vector<InputColumns> columns(spec.inputs.size());
  int64_t begin = 0;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    InputColumns& c = columns[k];
    c.begin = begin;
    c.count = 1;
    for (int64_t d : spec.inputs[k].shape) c.count *= d;
    begin += c.count;
  }
  for (const LayerSpec& layer : spec.layers) {
    if (layer.kind != LayerKind::kEmbedding || !layer.inputs[0].model_input) {
      continue;
    }
    InputColumns& c = columns[layer.inputs[0].index];
    c.vocabulary =
        c.ids ? std::min(c.vocabulary, layer.input_dim) : layer.input_dim;
    c.ids = true;
  }
  return columns;
}

DataType ModelFeedDtype(const ModelSpec& spec) {
  for (const InputColumns& c : ModelInputColumns(spec)) {
    if (!c.ids) return DT_FLOAT;
  }
  return DT_INT32;
}

absl::Status FitDatasetToModel(const ModelSpec& spec, data::Dataset* dataset) {
  const std::string source =
      dataset->origin.path.empty()
          ? std::string("the dataset")
          : absl::StrCat("'", dataset->origin.path, "'");
  const std::vector<InputColumns> columns = ModelInputColumns(spec);
  int64_t elements = 0;
  std::vector<std::string> inputs;
  for (size_t k = 0; k < columns.size(); ++k) {
    elements += columns[k].count;
    inputs.push_back(absl::StrCat(spec.inputs[k].name, " [",
                                  absl::StrJoin(spec.inputs[k].shape, ", "),
                                  "]"));
  }
  if (dataset->features.row_elements() != elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": examples have ", dataset->features.row_elements(),
        " features, but model '", spec.name, "' takes ", elements, " (input",
        inputs.size() > 1 ? "s " : " ", absl::StrJoin(inputs, ", "), ")"));
  }
  const DataType feed = ModelFeedDtype(spec);
  if (feed == DT_FLOAT && dataset->features.dtype() == DT_INT32) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": features are int32 ids, but model '", spec.name,
                     "' takes floats"));
  }
  int64_t largest = 0;
  for (size_t k = 0; k < columns.size(); ++k) {
    InputColumns c = columns[k];
    if (!c.ids) continue;
    if (c.vocabulary == 0) {
      // A growing table (model/dynamic_embeddings.h): any id the
      // row holds exactly, remapped to local rows each step.
      c.vocabulary = feed == DT_FLOAT ? kExactFloatIds
                                      : std::numeric_limits<int32_t>::max();
    }
    if (feed == DT_FLOAT && c.vocabulary > kExactFloatIds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model '", spec.name, "': input '", spec.inputs[k].name,
          "' takes ids of a vocabulary of ", c.vocabulary,
          ", too large to share a row with float inputs (at most 2^24)"));
    }
    PSTRAIN_RETURN_IF_ERROR(
        data::CheckIds(*dataset, c.begin, c.count, c.vocabulary));
    largest = std::max(largest, c.vocabulary);
  }
  if (feed == DT_INT32) return data::ConvertFeaturesToIds(largest, dataset);
  return absl::OkStatus();
}

std::vector<const void*> SplitModelInputs(
    const std::vector<InputColumns>& columns, DataType feed,
    const void* features, int64_t batch,
    std::vector<std::vector<float>>* buffers) {
  if (columns.size() == 1) return {features};
  const InputColumns& last = columns.back();
  const int64_t row = last.begin + last.count;
  buffers->resize(columns.size());
  std::vector<const void*> inputs;
  for (size_t k = 0; k < columns.size(); ++k) {
    const InputColumns& c = columns[k];
    std::vector<float>& buffer = (*buffers)[k];
    buffer.resize(batch * c.count);
    int32_t* ids = reinterpret_cast<int32_t*>(buffer.data());
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t j = 0; j < c.count; ++j) {
        const int64_t from = b * row + c.begin + j;
        const int64_t to = b * c.count + j;
        if (feed == DT_INT32) {
          ids[to] = static_cast<const int32_t*>(features)[from];
        } else if (c.ids) {
          ids[to] =
              static_cast<int32_t>(static_cast<const float*>(features)[from]);
        } else {
          buffer[to] = static_cast<const float*>(features)[from];
        }
      }
    }
    inputs.push_back(buffer.data());
  }
  return inputs;
}

}  // namespace worker
}  // namespace pstrain
