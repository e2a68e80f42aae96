// How a dataset's examples feed a model's inputs, and fitting a dataset to
// them. Each example is one row of features; a model with several inputs
// takes them from the row in the order of its inputs: the first input's
// elements, then the second's, and so on. An input that an Embedding reads
// takes int32 ids in [0, input_dim), so those columns must hold integer ids
// (refused otherwise with the file, line and column: data/id_features.h).
// The chief and every worker fit their data once, after reading it and the
// model.
//
//   PSTRAIN_ASSIGN_OR_RETURN(data::Dataset train, data::ReadDataDir(...));
//   PSTRAIN_RETURN_IF_ERROR(FitDatasetToModel(spec, &train));
//   for (const InputColumns& c : ModelInputColumns(spec)) ...
#ifndef PSTRAIN_DATA_MODEL_INPUT_H_
#define PSTRAIN_DATA_MODEL_INPUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "data/dataset.h"
#include "model/keras_model.h"
#include "proto/tensor.pb.h"

namespace pstrain {
namespace worker {

// Where one model input's elements lie in an example's row.
struct InputColumns {
  int64_t begin = 0;
  int64_t count = 0;
  // Read by an Embedding: int32 ids in [0, vocabulary) (the smallest
  // input_dim of the Embeddings reading it).
  bool ids = false;
  int64_t vocabulary = 0;
};

// Per spec.inputs, in order.
std::vector<InputColumns> ModelInputColumns(const ModelSpec& spec);

// The dtype FitDatasetToModel leaves the features in: DT_INT32 when every
// input takes ids, else DT_FLOAT (ids of a mixed row stay exact floats).
DataType ModelFeedDtype(const ModelSpec& spec);

// The model inputs' buffers for `batch` rows of `features` (laid out as
// `columns` say, in `feed`, ModelFeedDtype's dtype): a model of one input
// reads the rows as they are; one of several inputs gets its columns
// copied into (*buffers)[k] (resized to one per input), as int32 for ids.
// What the backends hand their layer graphs (on the host).
std::vector<const void*> SplitModelInputs(
    const std::vector<InputColumns>& columns, DataType feed,
    const void* features, int64_t batch,
    std::vector<std::vector<float>>* buffers);

// INVALID_ARGUMENT (naming the dataset's file, or the feature's line and
// column) when the examples do not have the model's number of input
// elements, when a model of float inputs is given int32 ids, or when an
// id column holds something else than ids of its vocabulary; converts the
// features to int32 when the model takes only ids.
// REQUIRES: data::ValidateDataset(*dataset) is OK.
absl::Status FitDatasetToModel(const ModelSpec& spec, data::Dataset* dataset);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_DATA_MODEL_INPUT_H_
