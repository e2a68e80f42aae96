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
// The ids live in an open-addressing table (linear probing, at most half
// full, grown by doubling and never shrunk) whose slots carry the step they
// were filled in: Clear() starts a step by counting one more, touching no
// slot, and a slot of an earlier step reads as empty. A step's ids are
// Insert()ed once per feature of the batch (26 per Criteo example), so this
// is on every step's path.
//
// Not thread-safe.
#ifndef PSTRAIN_COMPUTE_ID_REMAP_H_
#define PSTRAIN_COMPUTE_ID_REMAP_H_

#include <cstdint>
#include <vector>

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
  // Room for `capacity` distinct ids per step (>= 1; at most 2^31 - 1).
  explicit IdRemap(int64_t capacity);

  // Forgets the ids of the step.
  void Clear();

  // The local row of `id`: its row when seen before in the step, else the
  // next one. RESOURCE_EXHAUSTED naming the capacity when it is full.
  absl::StatusOr<int64_t> Insert(int64_t id);

  // Starts loading the slot where `id`'s probe will start. A step's table is
  // cold (the step's compute ran since the last one), so each new id is a
  // cache miss: announcing ids some way ahead of their Insert() made a
  // batch's inserts about a third faster here.
  void Prefetch(int64_t id) const { __builtin_prefetch(&slots_[Home(id)]); }

  // The local row of `id`, or -1 when it was not inserted in the step.
  int64_t Find(int64_t id) const;

  // The step's distinct ids, by local row.
  absl::Span<const int64_t> ids() const { return ids_; }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  int64_t capacity() const { return capacity_; }

 private:
  struct Slot {
    int64_t id;
    uint32_t step;  // the slot is empty unless this is step_
    int32_t row;
  };

  // Where `id`'s probe starts.
  size_t Home(int64_t id) const {
    // Fibonacci hashing: the product's top bits (ids may be small integers
    // as well as hashes).
    return static_cast<size_t>(
        (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15u) >> shift_);
  }
  // The index of the slot holding `id` in this step, or of the empty one
  // where it would go.
  size_t Probe(int64_t id) const;
  // Doubles the slots and puts the step's ids back.
  void Grow();

  const int64_t capacity_;
  std::vector<Slot> slots_;  // a power of two of them
  int shift_;                // 64 - log2(slots_.size())
  uint32_t step_ = 1;
  std::vector<int64_t> ids_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_ID_REMAP_H_
