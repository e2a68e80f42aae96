// A labelled dataset held in memory, and the conversion of its examples to
// the float32 rows a model is fed.
//
// Readers (ReadIdx, ReadCsv) produce a Dataset; the Prefetcher gathers its
// examples into batches:
//
//   Dataset mnist = ...;  // features: uint8 [60000, 28, 28]
//   std::vector<float> rows(2 * 784);
//   GatherFeatures(mnist, {17, 4}, absl::MakeSpan(rows));  // pixels / 255
//
// A Dataset is plain data: safe for concurrent reads.
#ifndef PSTRAIN_WORKER_DATA_DATASET_H_
#define PSTRAIN_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/tensor.h"

namespace pstrain {
namespace data {

struct Dataset {
  // Example i is row i: DT_UINT8 (IDX images, kept compact) or DT_FLOAT
  // (CSV), shape [N, ...].
  Tensor features;
  // N labels, each in [0, num_classes).
  std::vector<int32_t> labels;
  int num_classes = 0;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// OK when `dataset` is as described above; else INVALID_ARGUMENT naming the
// first problem (dtype, rank, row count, label and its index).
absl::Status ValidateDataset(const Dataset& dataset);

// Writes the features of the examples `indices`, in that order, to `out` as
// float32 rows: uint8 values v become v / 255.0f (in [0, 1], as Keras's
// `x / 255.0`), float32 values are copied.
// REQUIRES: ValidateDataset(dataset) is OK, each index is in
// [0, dataset.size()), out.size() == indices.size() * row elements.
void GatherFeatures(const Dataset& dataset, absl::Span<const int64_t> indices,
                    absl::Span<float> out);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_DATA_DATASET_H_
