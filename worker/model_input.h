// Fits a dataset to the model that will be fed it: a model that starts with
// a Keras Embedding takes int32 ids in [0, input_dim), so numeric features
// are converted to ids (refusing anything else with the file, line and
// column: data/id_features.h); any model needs as many features per example
// as its input shape holds. The chief and every worker do this once, after
// reading their data and the model.
//
//   PSTRAIN_ASSIGN_OR_RETURN(data::Dataset train, data::ReadDataDir(...));
//   PSTRAIN_RETURN_IF_ERROR(FitDatasetToModel(spec, &train));
#ifndef PSTRAIN_WORKER_MODEL_INPUT_H_
#define PSTRAIN_WORKER_MODEL_INPUT_H_

#include "absl/status/status.h"
#include "worker/data/dataset.h"
#include "worker/model/keras_model.h"

namespace pstrain {
namespace worker {

// INVALID_ARGUMENT (naming the dataset's file) when the examples do not have
// the model's number of input elements, when a float model is given ids, or
// when an Embedding model's features are not ids of its vocabulary.
// REQUIRES: data::ValidateDataset(*dataset) is OK.
absl::Status FitDatasetToModel(const ModelSpec& spec, data::Dataset* dataset);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_MODEL_INPUT_H_
