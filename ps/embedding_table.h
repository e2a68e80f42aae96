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
#ifndef PSTRAIN_PS_EMBEDDING_TABLE_H_
#define PSTRAIN_PS_EMBEDDING_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/training.pb.h"
#include "ps/optimizer.h"
#include "ps/sync_step.h"

namespace pstrain {
namespace ps {

class EmbeddingTable {
 public:
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
  int64_t Snapshot(std::vector<int64_t>* ids,
                   std::vector<std::vector<float>>* arrays) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces every row with the given ones (as Snapshot returns them) and
  // the version, and drops any partial sync step; a growing table forgets
  // rows not given. Reads waiting for a version give up (ABORTED).
  // REQUIRES: ids owned (growing) or exactly the piece's rows (fixed).
  void Restore(const std::vector<int64_t>& ids,
               const std::vector<std::vector<float>>& arrays, int64_t version)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);
  // Rows held now, and bytes held (rows with their slots).
  int64_t num_rows() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t bytes_held() const ABSL_LOCKS_EXCLUDED(mu_);
  // Of bytes_held, those of the optimizer slots.
  int64_t slot_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

  // OK if every id belongs to this piece; else INVALID_ARGUMENT (a growing
  // table's id of another bucket, a negative id) or OUT_OF_RANGE (an id
  // outside the vocabulary or this piece's rows), naming the id.
  absl::Status CheckIds(absl::Span<const int64_t> ids) const;

  // Waits (until `deadline`) for version() >= min_version, then copies the
  // rows of `ids` (distinct, checked) into `out` ([ids.size(), width]),
  // creating missing rows of a growing table. Returns the version read, or
  // DEADLINE_EXCEEDED naming the table and step, or ABORTED naming the table
  // and why if the table is restored or interrupted meanwhile.
  absl::StatusOr<int64_t> Read(absl::Span<const int64_t> ids,
                               int64_t min_version, absl::Time deadline,
                               float* out) ABSL_LOCKS_EXCLUDED(mu_);

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
  static constexpr int64_t kRowsPerBlock = 1024;

  // Sync: applies the step's sums to the touched rows and starts the next.
  void CompleteStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sum_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);

  EmbeddingTable(const VariableDef& def, bool growing, int bucket,
                 int num_buckets, int64_t row_begin, int64_t row_end,
                 const Optimizer* optimizer);

  // The storage index of `id`'s row, creating (and initializing) it in a
  // growing table.
  int64_t RowIndex(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // As RowIndex, but -1 for a row not created yet.
  int64_t FindRow(int64_t id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Storage row `index` of array `array` (0: values, 1 + i: slot i).
  float* Row(int array, int64_t index) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void AddBlock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies scaled row gradients; increments the version.
  void ApplyRowsLocked(absl::Span<const int64_t> ids, const float* g,
                       float scale) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const VariableDef def_;
  const bool growing_;
  const int bucket_;
  const int num_buckets_;
  const int64_t row_begin_;
  const int64_t row_end_;
  const int64_t width_;
  const Optimizer* const optimizer_;
  const int num_arrays_;  // values and slots

  mutable absl::Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_ ABSL_GUARDED_BY(mu_) = 0;
  // blocks_[b][a]: block b of array a, kRowsPerBlock rows.
  std::vector<std::vector<std::unique_ptr<float[]>>> blocks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, int64_t> index_ ABSL_GUARDED_BY(mu_);
  // Restore() and Interrupt() calls so far: a waiting Read gives up when it
  // changes, saying why the last one happened.
  int64_t interruptions_ ABSL_GUARDED_BY(mu_) = 0;
  std::string interruption_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex sum_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::flat_hash_map<int64_t, std::vector<float>> sums_ ABSL_GUARDED_BY(sum_mu_);
  SyncStep step_ ABSL_GUARDED_BY(sum_mu_);
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_EMBEDDING_TABLE_H_
