#include "ps/sync_step.h"

#include <algorithm>

namespace pstrain {
namespace ps {

SyncStep::Outcome SyncStep::Take(const Contribution& c) {
  if (c.owed) {
    for (int64_t batch : c.batches) {
      if (Holds(batch)) return Outcome::kCountedBefore;
    }
  } else if (c.sender >= 0) {
    if (IsAbsent(c.sender)) return Outcome::kAbsent;
    if (std::find(contributors_.begin(), contributors_.end(), c.sender) !=
        contributors_.end()) {
      return Outcome::kCountedBefore;
    }
    contributors_.push_back(c.sender);
  }
  if (!c.owed) ++contributions_;
  batches_.insert(batches_.end(), c.batches.begin(), c.batches.end());
  batch_sum_ += c.batch_size;
  skip_update_ = skip_update_ || c.skip_update;
  return Outcome::kAdded;
}

void SyncStep::Next() {
  previous_batches_.swap(batches_);
  batches_.clear();
  contributors_.clear();
  contributions_ = 0;
  absent_contributions_ = 0;
  batch_sum_ = 0;
  skip_update_ = false;
}

bool SyncStep::SetWorkers(int needed, absl::Span<const int> absent) {
  needed_ = needed;
  absent_.assign(absent.begin(), absent.end());
  absent_contributions_ = 0;
  for (int worker : contributors_) absent_contributions_ += IsAbsent(worker);
  return complete();
}

void SyncStep::Reset() {
  Next();
  previous_batches_.clear();
}

bool SyncStep::Holds(int64_t batch) const {
  return std::find(batches_.begin(), batches_.end(), batch) != batches_.end() ||
         std::find(previous_batches_.begin(), previous_batches_.end(),
                   batch) != previous_batches_.end();
}

bool SyncStep::IsAbsent(int worker) const {
  return std::find(absent_.begin(), absent_.end(), worker) != absent_.end();
}

}  // namespace ps
}  // namespace pstrain
