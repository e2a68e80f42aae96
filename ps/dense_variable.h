// One dense variable piece held by a ps shard: its rows [row_begin, row_end)
// of the full variable, the optimizer's slots for them, its version (updates
// applied), and in sync mode the running sum of the current step's gradients.
//
// Gradients arrive as chunks: byte ranges of the piece's row-major data (or,
// for a push of a part, of the part's rows on the piece: ps/dense_part.h),
// pointing into the received messages, so nothing is reassembled before use.
// In a sync step each element's sum is divided by the summed batch sizes of
// the contributions that covered it: a whole push covers every element, a
// part's push its rows or columns (a tensor-parallel group's M members each
// push their part, so an element of a split variable has one contribution
// per data-parallel group, while the step completes on every worker's).
// The caller (Shard) validates every chunk first; the methods here only
// apply.
//
// Thread-safe. Pulls read under a shared lock; updates take the exclusive
// lock once per push, so no reader ever sees part of an update. Sync
// accumulation has a lock of its own, so pulls are not blocked by adds.
#ifndef PSTRAIN_PS_DENSE_VARIABLE_H_
#define PSTRAIN_PS_DENSE_VARIABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "proto/training.pb.h"
#include "ps/dense_part.h"
#include "ps/interruptions.h"
#include "ps/optimizer.h"
#include "ps/sync_step.h"

namespace pstrain {
namespace ps {

// A byte range of a piece's data carried by one message.
struct Chunk {
  int64_t offset = 0;      // Bytes from the start of the piece.
  // Little-endian floats, size a multiple of 4, at any address: they lie
  // where they arrived in gRPC's buffers, so floats are not aligned.
  absl::string_view data;
};

// A variable's value as a pull reads it: `size` bytes at `data`, as of
// `version`. When `owner` is set, the bytes stay as read while it (or a
// copy of it) lives, after the read returns: updates write into a copy of
// the value instead.
struct ValueView {
  int64_t version = 0;
  const char* data = nullptr;
  int64_t size = 0;
  std::shared_ptr<const void> owner;
};

class DenseVariable {
 public:
  // Pieces up to this size are lent to pulls (ValueView::owner), larger ones
  // only read under the lock: a lent value makes the next update copy it,
  // and a copy this large would come from fresh pages (malloc maps
  // allocations of 32 MB and more, common/process.h), which cost more than
  // the copy a pull saves.
  static constexpr int64_t kMaxLentBytes = 32 << 20;

  // The piece rows [row_begin, row_end) of `def`, initialized (see
  // ps/initializer.h), with zeroed slots for `optimizer`, which must outlive
  // it. INVALID_ARGUMENT for a bad initializer or shape.
  static absl::StatusOr<std::unique_ptr<DenseVariable>> Create(
      const VariableDef& def, int64_t row_begin, int64_t row_end,
      const Optimizer* optimizer);

  const VariableDef& def() const { return def_; }
  const std::string& name() const { return def_.name(); }
  int64_t row_begin() const { return row_begin_; }
  int64_t row_end() const { return row_end_; }
  // Bytes of the piece's value (the size a full gradient must have).
  int64_t num_bytes() const { return num_bytes_; }
  // Bytes held: value, slots and the sync sum.
  int64_t bytes_held() const;
  // Of bytes_held, those of the optimizer slots.
  int64_t slot_bytes() const;

  int64_t version() const ABSL_LOCKS_EXCLUDED(mu_);

  // The value is array 0, optimizer slot i is array 1 + i; each holds
  // num_bytes(). ArrayName: the name, or "<name>/<slot name>".
  int num_arrays() const { return 1 + optimizer_->NumSlots(); }
  std::string ArrayName(int array) const;

  // Calls save(array, data, size) for every array, all under one shared
  // lock (a consistent state); returns the version they hold.
  int64_t ReadArrays(
      const std::function<void(int, const char*, int64_t)>& save) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces every array (arrays[a] holds num_bytes()) and the version, and
  // drops any partial sync step; reads waiting for a version give up
  // (ABORTED). REQUIRES: arrays.size() == num_arrays().
  void Restore(const std::vector<std::string>& arrays, int64_t version)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);

  // Waits until version() >= min_version or `deadline`, then calls
  // read(value) once with the whole value, under the shared lock (read must
  // not block; it must copy the bytes unless it keeps value.owner, set for
  // pieces of at most kMaxLentBytes). DEADLINE_EXCEEDED naming the
  // variable, the step and how many of `needed` gradients arrived, if the
  // wait times out; ABORTED if the variable is restored or interrupted
  // meanwhile.
  absl::StatusOr<int64_t> Read(
      int64_t min_version, absl::Time deadline, int needed,
      const std::function<void(const ValueView&)>& read) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Async: applies the gradient `chunks` (covering the piece exactly once),
  // divided by `batch_size`, as one update. Returns the new version.
  int64_t ApplyAsync(int64_t batch_size, absl::Span<const Chunk> chunks)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);

  // Sync: adds `chunks` to the sum of step `version` (== version() when
  // pushed; an older version is dropped as late) if the step takes the
  // contribution (SyncStep::Take: a worker counts once per step, an absent
  // worker not at all, an owed batch unless held). The step's last needed
  // contribution (SetWorkers) divides the sum by the step's summed batch
  // sizes and applies it once (not at all if a contribution set
  // skip_update). Says whether the gradient was added, had been counted
  // before, or was dropped (late, or from an absent worker). With `part`,
  // the chunks are of the part's rows on this piece (PartRowsOnPiece), the
  // contribution covering only those elements; the caller checked them.
  enum class Accumulated { kAdded, kCountedBefore, kDropped };
  Accumulated AccumulateSync(int64_t version, absl::Span<const Chunk> chunks,
                             const Contribution& contribution,
                             const DensePart* part = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);
  // Wakes every Read waiting for a version: they return ABORTED saying
  // `why` (the ps is shutting down).
  void Interrupt(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // Sync: a step is applied once it has `needed` (>= 1) contributions (1
  // until set), besides any that the `absent` workers made to it before
  // they were presumed dead; theirs are refused from now on. The current
  // step is applied at once if it already has them.
  void SetWorkers(int needed, absl::Span<const int> absent)
      ABSL_LOCKS_EXCLUDED(mu_, sum_mu_);

 private:
  DenseVariable(const VariableDef& def, int64_t row_begin, int64_t row_end,
                const Optimizer* optimizer, Tensor value,
                std::vector<Tensor> slots);

  // The value, to be updated in place: first copied if a pull holds it.
  absl::Span<float> MutableValueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync: applies the step's sum divided by its global batch (element by
  // element when parts were pushed), once, and starts the next step. `last`:
  // the chunks of a whole push that completes a step of whole pushes, not
  // yet in the sum: added as the sum is read.
  void CompleteStepLocked(absl::Span<const Chunk> last = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sum_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // The optimizer's update of elements [first, first + g.size()) of the
  // value and its slots by g.
  void UpdateLocked(int64_t first, const ScaledGradient& g)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same by each of `chunks` times `scale`, read where they lie.
  void UpdateLocked(absl::Span<const Chunk> chunks, float scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the step's sum (and `last`) divided by its global batch.
  void ApplySumLocked(absl::Span<const Chunk> last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sum_mu_, mu_);
  // 1 / the batch sizes that covered element i of the sum, or 0 when none.
  float InverseCoverageLocked(int64_t i) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sum_mu_);
  // Forgets the step's coverage (the step was applied or dropped).
  void ClearCoverageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sum_mu_);

  const VariableDef def_;
  const int64_t row_begin_;
  const int64_t row_end_;
  const Optimizer* const optimizer_;
  const int64_t num_bytes_;

  mutable absl::Mutex mu_;
  // Shared with the pulls it was lent to (Read) until they let go.
  std::shared_ptr<Tensor> value_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<float*> slot_data_ ABSL_GUARDED_BY(mu_);
  // UpdateLocked's slot pointers, one per slot.
  std::vector<float*> slot_scratch_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  // Restore() and Interrupt() calls so far: a waiting Read gives up when
  // they change, saying why the last one happened.
  Interruptions interruptions_ ABSL_GUARDED_BY(mu_);

  // Sync mode: the current step's sum, allocated on the first sync push.
  mutable absl::Mutex sum_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // In double, so that the step's sum (rounded to float once) does not
  // depend on the order in which its pushes came: float additions of three
  // or more pushes round differently in different orders, and a rounding
  // can flip a ReLU downstream.
  std::vector<double> sum_ ABSL_GUARDED_BY(sum_mu_);
  // Whether sum_ holds the current step's sums; until then it reads as
  // zeros. A step's first whole push writes the sum instead of adding to
  // it, so sum_ is not zeroed between steps: a pass less over it per step.
  bool sum_started_ ABSL_GUARDED_BY(sum_mu_) = false;
  SyncStep step_ ABSL_GUARDED_BY(sum_mu_);
  // The step's coverage once a part was pushed to it: the batch sizes of its
  // whole contributions, and of its parts' per dimension d by index of d
  // (piece rows for d = 0; empty for a dimension no part cut); an element's
  // divisor is whole_batch_ plus, for each d, dim_batch_[d] at its index.
  bool parts_in_step_ ABSL_GUARDED_BY(sum_mu_) = false;
  int64_t whole_batch_ ABSL_GUARDED_BY(sum_mu_) = 0;
  std::vector<std::vector<int64_t>> dim_batch_ ABSL_GUARDED_BY(sum_mu_);
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_DENSE_VARIABLE_H_
