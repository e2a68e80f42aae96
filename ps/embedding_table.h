// One embedding table piece held by a ps shard, pulled and pushed by row id,
// with optimizer state per row.
//
// Two kinds, by placement:
//   - growing (ROW_HASH; the table's shape[0] is 0): this piece holds the ids
//     with id mod num_buckets == bucket, each row created on first touch
//     (pull or push) from the initializer, whose values depend only on the
//     seed and the id (ps/initializer.h), so new ids need no vocabulary;
//   - fixed vocabulary (WHOLE or ROW_RANGES): rows [row_begin, row_end) of a
//     [vocabulary, width] table, stored densely; other ids are refused.
// Only touched rows are updated. Thread-safe: reads share a lock, updates
// take it exclusively once per push; sync sums have a lock of their own.
//
// A growing table's VariableDef.lifecycle bounds its rows:
//   - admission (min_count N > 1): an id is counted once per applied update
//     (async push, sync step) that touches it; pulls do not count, so that
//     evaluation and the pull before each push do not inflate the count.
//     Until its N-th update the id has no row: a pull reads zeros and its
//     gradients are dropped; the N-th update creates the row from the
//     initializer and applies that update's gradient. The counts of ids not
//     admitted yet are kept exactly in a hash map (id -> count, last
//     counted version; 24 bytes of payload each) rather than a count-min
//     sketch: exact admission at N, and counts that can be checkpointed and
//     re-spread by id when the number of ps tasks changes (a sketch cannot
//     be split by bucket). The map is bounded by the TTL sweep (entries not
//     counted for ttl_steps go) and, with max_rows, to max_rows entries (the
//     lowest counts go first, in the same batches as rows).
//   - TTL (ttl_steps S > 0): rows (and pending counts) not updated for S
//     versions of the piece are removed by a sweep that runs every
//     max(1, S / 10) versions: O(rows) per sweep, so O(10 * rows / S) per
//     version amortized, and a row outlives its TTL by less than S / 10 + 1
//     versions.
//   - LFU cap (max_rows R > 0): a row that would make R + 1 rows first
//     evicts the max(1, R / 10) least frequently updated rows (fewest
//     updates, then oldest update): one O(rows) selection per R / 10
//     creations, O(10) per created row amortized; the piece never holds
//     more than R rows, and its storage never more than the blocks R rows
//     fill plus one (kRowsPerBlock: below 64k rows at most about 4 R rows;
//     above, at most 4 MiB per array more than R rows). Storage is written
//     only as rows are created, so memory never written costs nothing.
// Each row carries its update count and last-update version (RowStats),
// saved in checkpoints with the rows.
#ifndef PSTRAIN_PS_EMBEDDING_TABLE_H_
#define PSTRAIN_PS_EMBEDDING_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/huge_pages.h"
#include "proto/training.pb.h"
#include "ps/interruptions.h"
#include "ps/optimizer.h"
#include "ps/sync_step.h"

namespace pstrain {
namespace ps {

class EmbeddingTable {
 public:
  // A growing table's per-row lifecycle data, in the order of Snapshot's
  // ids, and the admission counts of ids without a row yet.
  struct RowStats {
    std::vector<int64_t> counts;        // updates applied to each row
    std::vector<int64_t> last_updates;  // version of each row's last update
    std::vector<int64_t> pending_ids;   // ascending
    std::vector<int64_t> pending_counts;
    std::vector<int64_t> pending_last_seen;
  };

  // A growing piece: bucket `bucket` of `num_buckets`.
  static absl::StatusOr<std::unique_ptr<EmbeddingTable>> CreateGrowing(
      const VariableDef& def, int bucket, int num_buckets,
      const Optimizer* optimizer);
  // A fixed-vocabulary piece: rows [row_begin, row_end).
  static absl::StatusOr<std::unique_ptr<EmbeddingTable>> CreateFixed(
      const VariableDef& def, int64_t row_begin, int64_t row_end,
      const Optimizer* optimizer);

  const std::string& name() const { return def_.name(); }
  int64_t width() const { return width_; }
  int64_t version() const ABSL_LOCKS_EXCLUDED(mu_);
  bool growing() const { return growing_; }
  int64_t row_begin() const { return row_begin_; }
  int64_t row_end() const { return row_end_; }
  // Whether a growing table's piece holds `id` (its bucket).
  bool OwnsId(int64_t id) const { return id >= 0 && id % num_buckets_ == bucket_; }

  // As DenseVariable: array 0 the rows' values, 1 + i slot i.
  int num_arrays() const { return num_arrays_; }
  std::string ArrayName(int array) const;

  // A consistent copy of every row: `ids` ascending (a fixed table: all of
  // row_begin..row_end - 1), arrays[a] their rows of array a. Returns the
  // version.
  // With `stats`, also each row's lifecycle data (growing tables).
  int64_t Snapshot(std::vector<int64_t>* ids,
                   std::vector<std::vector<float>>* arrays,
                   RowStats* stats = nullptr) const ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces every row with the given ones (as Snapshot returns them) and
  // the version, and drops any partial sync step; a growing table forgets
  // rows not given. Reads waiting for a version give up (ABORTED).
  // `stats` (growing tables; null: counts 0, last update at `version`, no
  // pending counts) gives the rows' lifecycle data; a piece with max_rows
  // then evicts down to it.
  // REQUIRES: ids owned (growing) or exactly the piece's rows (fixed);
  // stats' row vectors as long as ids, its pending ids owned.
  void Restore(const std::vector<int64_t>& ids,
               const std::vector<std::vector<float>>& arrays, int64_t version,
               const RowStats* stats = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);
  // Whether the def has a lifecycle (its row stats are worth saving).
  bool has_lifecycle() const { return has_lifecycle_; }
  // Rows held now, and bytes held (rows with their slots).
  int64_t num_rows() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t bytes_held() const ABSL_LOCKS_EXCLUDED(mu_);
  // Of bytes_held, those of the optimizer slots.
  int64_t slot_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes one row costs: its value and slots, plus (growing tables) its
  // lifecycle data, its id and its hash-map entry.
  int64_t bytes_per_row() const;
  // Bytes of the bookkeeping beside bytes_held (growing tables: row ids,
  // lifecycle data, hash-map storage, pending admission counts).
  int64_t metadata_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Ids counted but not admitted yet (min_count > 1).
  int64_t num_pending() const ABSL_LOCKS_EXCLUDED(mu_);
  // Rows removed so far by the TTL sweep and by the LFU cap.
  int64_t rows_expired() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t rows_evicted() const ABSL_LOCKS_EXCLUDED(mu_);

  // OK if every id belongs to this piece; else INVALID_ARGUMENT (a growing
  // table's id of another bucket, a negative id) or OUT_OF_RANGE (an id
  // outside the vocabulary or this piece's rows), naming the id.
  absl::Status CheckIds(absl::Span<const int64_t> ids) const;

  // Waits (until `deadline`) for version() >= min_version, then copies the
  // rows of `ids` (distinct, checked) into `out` ([ids.size(), width]),
  // creating missing rows of a growing table (with `read_only`, writing
  // what such a row would hold without storing it). Returns the version
  // read, or DEADLINE_EXCEEDED naming the table and step, or ABORTED
  // naming the table and why if the table is restored or interrupted
  // meanwhile.
  absl::StatusOr<int64_t> Read(absl::Span<const int64_t> ids,
                               int64_t min_version, absl::Time deadline,
                               float* out, bool read_only = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What Read gives for `id` of growing table `def` while it has no row
  // (the `width` floats of `out`): zeros while admission holds ids back
  // (def.lifecycle().min_count() > 1), else the row as it would be created
  // (FillRows). Also what reading a checkpoint's rows gives for an id it
  // does not hold (chief/checkpoint_rows.h).
  static void FillAbsentRow(const VariableDef& def, int64_t id, float* out);

  // Async: applies row gradients `g` ([ids.size(), width], distinct checked
  // ids, sums over the batch) divided by batch_size. Returns the new version.
  int64_t ApplyAsync(absl::Span<const int64_t> ids, const float* g,
                     int64_t batch_size) ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);

  // Sync: adds the row gradients `g` ([ids.size(), width], distinct checked
  // ids) to step `version`'s sums if the step takes the contribution, as
  // DenseVariable::AccumulateSync; the step's last needed contribution
  // applies the step to the touched rows. Returns false if dropped (late,
  // or from an absent worker).
  bool AccumulateSync(int64_t version, absl::Span<const int64_t> ids,
                      const float* g, const Contribution& contribution)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);
  // Wakes every Read waiting for a version: they return ABORTED saying
  // `why` (the ps is shutting down).
  void Interrupt(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // As DenseVariable::SetWorkers.
  void SetWorkers(int needed, absl::Span<const int> absent)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);

 private:
  // Storage grows by blocks: the first holds kRowsPerBlock rows, each next
  // one twice the last until a block of one array fills a huge page
  // (common/huge_pages.h: 32768 rows of width 16), and all later ones as
  // many. A small table holds little; a large one sits on huge pages.
  static constexpr int kLog2RowsPerBlock = 10;
  static constexpr int64_t kRowsPerBlock = int64_t{1} << kLog2RowsPerBlock;
  // How many times blocks of `width` floats per row double.
  static int BigShift(int64_t width);
  // How many ids ahead a pass over ids prefetches their memory.
  static constexpr size_t kPrefetchAhead = 8;

  // Sync: applies the step's sums to the touched rows and starts the next.
  void CompleteStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sum_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Empties the step's sums.
  void ClearSumsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sum_mu_);
  // Copies row `index` (-1: none yet) of `id` into `out`: its values, zeros
  // while admission holds it back, or its initial values.
  void CopyRowLocked(int64_t id, int64_t index, float* out) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  EmbeddingTable(const VariableDef& def, bool growing, int bucket,
                 int num_buckets, int64_t row_begin, int64_t row_end,
                 const Optimizer* optimizer);

  // The storage index of `id`'s row, creating (and initializing) it in a
  // growing table (evicting first if the table is at max_rows, unless
  // !may_evict).
  int64_t RowIndex(int64_t id, bool may_evict = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the rows at storage `indices` (distinct), moving the last rows
  // into their places, and frees unused trailing blocks.
  void RemoveRowsLocked(std::vector<int64_t> indices)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts the least frequently updated rows down to `keep` rows.
  void EvictLocked(int64_t keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the lowest pending counts down to `keep` entries.
  void TrimPendingLocked(size_t keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Increments the version; runs the TTL sweep when due.
  void AdvanceVersionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // As RowIndex, but -1 for a row not created yet.
  int64_t FindRow(int64_t id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The first storage index of block `block`.
  int64_t BlockStart(size_t block) const;
  // The block of storage index `index`, and its row in the block.
  std::pair<int64_t, int64_t> Locate(int64_t index) const;
  // Storage row `index` of array `array` (0: values, 1 + i: slot i).
  float* Row(int array, int64_t index) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  const float* Row(int array, int64_t index) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void AddBlock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies scaled row gradients; increments the version.
  void ApplyRowsLocked(absl::Span<const int64_t> ids, const float* g,
                       float scale) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The optimizer's update of row `index` by scale * g (its width);
  // `slots` is scratch of the slot count.
  void ApplyRowLocked(int64_t index, const float* g, float scale,
                      std::vector<float*>& slots)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const VariableDef def_;
  const bool growing_;
  const int bucket_;
  const int num_buckets_;
  const int64_t row_begin_;
  const int64_t row_end_;
  const int64_t width_;
  const Optimizer* const optimizer_;
  const int num_arrays_;  // values and slots
  // The lifecycle (growing tables; else 1, 0, 0).
  const bool has_lifecycle_;
  const int64_t min_count_;
  const int64_t ttl_steps_;
  const int64_t max_rows_;
  const int big_shift_;  // BigShift(width_)

  mutable absl::Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_ ABSL_GUARDED_BY(mu_) = 0;
  // blocks_[b][a]: block b of array a (see kRowsPerBlock).
  std::vector<std::vector<HugeArray<float>>> blocks_ ABSL_GUARDED_BY(mu_);
  // Growing tables: id -> storage index.
  absl::flat_hash_map<int64_t, int64_t, absl::Hash<int64_t>,
                      std::equal_to<int64_t>,
                      HugePageAllocator<std::pair<const int64_t, int64_t>>>
      index_ ABSL_GUARDED_BY(mu_);
  // Growing tables, by storage index: the row's id, updates applied, and
  // version of its last update (of its creation until updated).
  struct RowMeta {
    int64_t count = 0;
    int64_t last_update = 0;
  };
  std::vector<int64_t, HugePageAllocator<int64_t>> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<RowMeta, HugePageAllocator<RowMeta>> meta_ ABSL_GUARDED_BY(mu_);
  // Admission counts of ids without a row (min_count > 1): count and the
  // version it was last counted at.
  absl::flat_hash_map<int64_t, RowMeta> pending_ ABSL_GUARDED_BY(mu_);
  int64_t next_sweep_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_expired_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_evicted_ ABSL_GUARDED_BY(mu_) = 0;
  // Restore() and Interrupt() calls so far: a waiting Read gives up when
  // they change, saying why the last one happened.
  Interruptions interruptions_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex sum_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // The sync step's sums of row gradients, in one array that keeps its
  // capacity from step to step: sum_ids_[p]'s sum is sum_values_[p * width,
  // (p + 1) * width), and sum_positions_[id] == p. In double, so that a
  // sum (rounded to float once) does not depend on the pushes' order.
  absl::flat_hash_map<int64_t, int64_t> sum_positions_ ABSL_GUARDED_BY(sum_mu_);
  std::vector<int64_t> sum_ids_ ABSL_GUARDED_BY(sum_mu_);
  std::vector<double> sum_values_ ABSL_GUARDED_BY(sum_mu_);
  SyncStep step_ ABSL_GUARDED_BY(sum_mu_);
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_EMBEDDING_TABLE_H_
