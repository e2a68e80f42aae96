// Turns a dataset's numeric features into the int32 ids that a model starting
// with a Keras Embedding is fed: a CSV of integer id columns and a label
// column is read as floats (csv_reader.h) and converted here once the model,
// and so the vocabulary, is known.
//
//   PSTRAIN_ASSIGN_OR_RETURN(Dataset d, ReadCsv("train.csv"));
//   PSTRAIN_RETURN_IF_ERROR(ConvertFeaturesToIds(/*vocabulary=*/50, &d));
//   // d.features: int32 [N, F], every id in [0, 50).
#ifndef PSTRAIN_DATA_ID_FEATURES_H_
#define PSTRAIN_DATA_ID_FEATURES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "data/dataset.h"

namespace pstrain {
namespace data {

// Replaces `dataset`'s features (uint8, float32, or already int32) with int32
// ids of the same shape. Every value must be an integer in [0, vocabulary):
// anything else is INVALID_ARGUMENT naming where it came from (the file, line
// and column for CSV; DescribeFeature), the value and the range, and leaves
// `dataset` unchanged. A float32 feature that holds an integer exactly
// ("3", "3.0") is that id. REQUIRES: ValidateDataset(*dataset) is OK.
absl::Status ConvertFeaturesToIds(int64_t vocabulary, Dataset* dataset);

// Checks, as ConvertFeaturesToIds, that features [begin, begin + count) of
// every example are ids in [0, vocabulary), converting nothing.
absl::Status CheckIds(const Dataset& dataset, int64_t begin, int64_t count,
                      int64_t vocabulary);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_ID_FEATURES_H_
