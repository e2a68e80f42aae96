// The local rows of a growing embedding table for one step
// (model/dynamic_embeddings.h): the step's distinct 64-bit ids,
// numbered 0, 1, ... in the order first seen, so that the backend computes
// the Embedding on a mirror of as many rows as the step has distinct ids,
// and pull and push move those rows by their real ids.
//
//   IdRemap remap(/*capacity=*/batch * ids_per_example);
//   for (int64_t id : batch_ids) {
//     PSTRAIN_ASSIGN_OR_RETURN(int64_t row, remap.Insert(id));
//     ... the backend reads local row `row` ...
//   }
//   PullRows(remap.ids());  // ids()[row] is the id of local row `row`
//
// The ps keys rows by non-negative int64 (ps/embedding_table.h), while a
// Criteo id is any 64 bits (uint64 bits in an int64): TableKey folds an id
// into [0, 2^63) by clearing its sign bit, so two ids differing only there
// share a row (for hashed ids, a collision as rare as any other).
//
// Not thread-safe.
#ifndef PSTRAIN_COMPUTE_ID_REMAP_H_
#define PSTRAIN_COMPUTE_ID_REMAP_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain {
namespace worker {

// The ps's key of id `id`: `id` with its sign bit cleared.
inline int64_t TableKey(int64_t id) {
  return static_cast<int64_t>(static_cast<uint64_t>(id) & ~(uint64_t{1} << 63));
}

class IdRemap {
 public:
  // Room for `capacity` distinct ids per step (>= 1).
  explicit IdRemap(int64_t capacity);

  // Forgets the ids of the step.
  void Clear();

  // The local row of `id`: its row when seen before in the step, else the
  // next one. RESOURCE_EXHAUSTED naming the capacity when it is full.
  absl::StatusOr<int64_t> Insert(int64_t id);

  // The local row of `id`, or -1 when it was not inserted in the step.
  int64_t Find(int64_t id) const;

  // The step's distinct ids, by local row.
  absl::Span<const int64_t> ids() const { return ids_; }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  int64_t capacity() const { return capacity_; }

 private:
  const int64_t capacity_;
  absl::flat_hash_map<int64_t, int64_t> rows_;
  std::vector<int64_t> ids_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_ID_REMAP_H_
