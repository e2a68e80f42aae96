// A labelled dataset held in memory, and the conversion of its examples to
// the rows a model is fed: float32, or int32 ids for a model that starts with
// an Embedding (id_features.h turns numeric features into ids).
//
// Readers (ReadIdx, ReadCsv) produce a Dataset; the Prefetcher gathers its
// examples into batches:
//
//   Dataset mnist = ...;  // features: uint8 [60000, 28, 28]
//   std::vector<float> rows(2 * 784);
//   GatherFeatures(mnist, {17, 4}, absl::MakeSpan(rows));  // pixels / 255
//
// A Dataset is plain data: safe for concurrent reads.
#ifndef PSTRAIN_DATA_DATASET_H_
#define PSTRAIN_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/tensor.h"

namespace pstrain {
namespace data {

// Where a dataset's examples were read from, for error messages that point
// into the file.
struct DataOrigin {
  std::string path;
  // CSV: the 1-based line of each example, and the 1-based column of each
  // feature. Empty when the reader does not know them (IDX).
  std::vector<int64_t> lines;
  std::vector<int> feature_columns;
};

struct Dataset {
  // Example i is row i: DT_UINT8 (IDX images, kept compact), DT_FLOAT
  // (CSV) or DT_INT32 (ids, >= 0, for a model starting with an Embedding),
  // shape [N, ...].
  Tensor features;
  // N labels, each in [0, num_classes).
  std::vector<int32_t> labels;
  int num_classes = 0;
  DataOrigin origin;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// OK when `dataset` is as described above; else INVALID_ARGUMENT naming the
// first problem (dtype, rank, row count, label and its index, a negative id).
absl::Status ValidateDataset(const Dataset& dataset);

// Where example `index`'s feature `feature` (0-based, within its row) came
// from: "'train.csv': line 7, column 2", or "'images.gz': example 6, feature
// 1" when the lines are not known.
std::string DescribeFeature(const Dataset& dataset, int64_t index,
                            int64_t feature);

// The dtype a model is fed this dataset's features in: DT_INT32 for ids,
// DT_FLOAT for everything else.
DataType FeedDtype(const Dataset& dataset);

// Writes the features of the examples `indices`, in that order, to `out`
// in FeedDtype(dataset): int32 ids copied, others as GatherFeatures.
// REQUIRES: ValidateDataset(dataset) is OK, each index is in
// [0, dataset.size()), `out` holds indices.size() * row elements.
void GatherExamples(const Dataset& dataset, absl::Span<const int64_t> indices,
                    void* out);

// Writes the features of the examples `indices`, in that order, to `out` as
// float32 rows: uint8 values v become v / 255.0f (in [0, 1], as Keras's
// `x / 255.0`), float32 values are copied.
// REQUIRES: ValidateDataset(dataset) is OK, features are not int32 ids, each
// index is in [0, dataset.size()), out.size() == indices.size() * row
// elements.
void GatherFeatures(const Dataset& dataset, absl::Span<const int64_t> indices,
                    absl::Span<float> out);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_DATASET_H_
