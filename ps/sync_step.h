// The bookkeeping of a sync step, shared by DenseVariable and EmbeddingTable
// (each keeps the step's gradient sums itself): which workers' gradients and
// which global batches the step holds, how many contributions complete it,
// and which batches the step before held.
//
// A worker's gradient counts once per step (a retried push, or a restarted
// worker redoing the step, is recognised by its sender). Under
// --on_worker_failure=continue a worker presumed dead may have pushed its
// last step to some ps tasks and not to others; the worker covering for it
// trains that batch again and pushes it as owed (RequestHeader.owed), and
// each ps adds it only if neither this step nor the one before holds it.
//
//   SyncStep step;
//   step.SetWorkers(2, {});
//   if (step.Take(contribution) == SyncStep::Outcome::kAdded) {
//     ... add the gradient to the sums ...
//   }
//   if (step.complete()) { ... apply sums / step.batch_sum() ...; step.Next(); }
//
// Not thread-safe: its owner guards it with the lock of the sums.
#ifndef PSTRAIN_PS_SYNC_STEP_H_
#define PSTRAIN_PS_SYNC_STEP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace pstrain {
namespace ps {

// A sync push's gradient: who sent it and what it sums over.
struct Contribution {
  // The worker (< 0: a sender that is not a worker, never deduplicated).
  int sender = -1;
  // The global batches it sums over (RequestHeader.batches).
  absl::Span<const int64_t> batches;
  // A covering worker's gradient of batches owed by absent workers
  // (RequestHeader.owed): not a contribution of its own, since the covering
  // worker's own push of the step follows it.
  bool owed = false;
  // Examples it sums over.
  int64_t batch_size = 0;
  // Whether it voids the step's update (a NaN under nan_policy skip_step).
  bool skip_update = false;
};

class SyncStep {
 public:
  enum class Outcome {
    kAdded,          // the caller adds the gradient to the step's sums
    kCountedBefore,  // held already: the step completes as it would have
    kAbsent,         // the sender is presumed dead (SetWorkers): dropped
  };

  // A worker's gradient is added once per step. An owed one is added unless
  // this step or the one before already holds any of its batches.
  Outcome Take(const Contribution& c);

  // Whether the step has its contributions: `needed` (SetWorkers), plus
  // those that absent workers made before they were presumed dead (their
  // gradients are in the sums, so a present worker's must still come).
  bool complete() const {
    return contributions_ > 0 &&
           contributions_ >= needed_ + absent_contributions_;
  }
  int contributions() const { return contributions_; }
  int64_t batch_sum() const { return batch_sum_; }
  bool skip_update() const { return skip_update_; }

  // The step was applied: the next one starts empty.
  void Next();
  // Contributions a step needs (>= 1), and the workers presumed dead, whose
  // gradients are refused from now on. Returns complete(): a step that
  // waited for a worker now absent may have what it needs.
  bool SetWorkers(int needed, absl::Span<const int> absent);
  // The variable was restored: no step holds anything.
  void Reset();

 private:
  bool IsAbsent(int worker) const;
  bool Holds(int64_t batch) const;

  int needed_ = 1;
  std::vector<int> absent_;
  int contributions_ = 0;
  // Of contributions_, those of workers absent since they made them.
  int absent_contributions_ = 0;
  int64_t batch_sum_ = 0;
  bool skip_update_ = false;
  // The workers whose gradients the step holds.
  std::vector<int> contributors_;
  // The global batches the step holds, and those the step before held.
  std::vector<int64_t> batches_;
  std::vector<int64_t> previous_batches_;
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_SYNC_STEP_H_
