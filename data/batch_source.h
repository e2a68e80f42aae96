// Where a worker's training batches come from, one step after another:
// the Prefetcher over a dataset held in memory (prefetcher.h), or a stream
// of files read as training goes (criteo_batch_source.h). The trainer
// takes batches through this interface and needs not know which.
//
//   PSTRAIN_ASSIGN_OR_RETURN(Batch* batch, source->Next());
//   Step(batch->features, batch->labels);
//   source->Release(batch);
#ifndef PSTRAIN_DATA_BATCH_SOURCE_H_
#define PSTRAIN_DATA_BATCH_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"

namespace pstrain {
namespace data {

struct Batch {
  int64_t epoch = 0;
  int64_t step = 0;              // In [0, steps_per_epoch).
  bool end_of_epoch = false;     // The epoch's last step.
  Tensor features;               // FeedDtype [size(), example shape...]
  Tensor labels;                 // int32 [size()]
  std::vector<int64_t> indices;  // Dataset index (or line) of each row.
  // A source of 64-bit ids (Criteo): int64 [size(), row elements], the ids
  // at the columns of inputs that take ids (whose `features` hold 0 until
  // worker/sparse_tables.h writes local rows there); else empty.
  Tensor wide_ids;

  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // The next step's batch, blocking until it is ready; the caller owns it
  // until Release. OUT_OF_RANGE after the last one.
  virtual absl::StatusOr<Batch*> Next() = 0;

  // Returns `batch` for reuse. REQUIRES: it came from this Next and was not
  // released since. Release(nullptr) does nothing.
  virtual void Release(Batch* batch) = 0;
};

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_BATCH_SOURCE_H_
