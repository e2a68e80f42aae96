#include "chief/membership.h"

#include <algorithm>

namespace pstrain {
namespace chief {

bool IsAbsent(const Membership& membership, int worker) {
  for (const AbsentWorker& a : membership.absent()) {
    if (a.index() == worker) return true;
  }
  return false;
}

std::vector<int> AbsentWorkers(const Membership& membership) {
  std::vector<int> indices;
  for (const AbsentWorker& a : membership.absent()) indices.push_back(a.index());
  std::sort(indices.begin(), indices.end());
  return indices;
}

int CoveringWorker(const Membership& membership, int worker, int num_workers) {
  for (int i = 1; i < num_workers; ++i) {
    const int candidate = (worker + i) % num_workers;
    if (!IsAbsent(membership, candidate)) return candidate;
  }
  return -1;
}

Membership WithAbsent(const Membership& membership, int dead, int64_t stuck,
                      int num_workers) {
  Membership next;
  next.set_from_step(stuck + 1);
  for (const AbsentWorker& a : membership.absent()) {
    AbsentWorker* copy = next.add_absent();
    copy->set_index(a.index());
    // Batches `dead` covered are owed from `stuck` (or from earlier, if it
    // died in the step it was to train the earlier ones in); the others are
    // trained up to `stuck` by their covering worker.
    int64_t owed = stuck + 1;
    if (CoveringWorker(membership, a.index(), num_workers) == dead) {
      owed = stuck <= membership.from_step() ? std::min(a.owed_from(), stuck)
                                             : stuck;
    }
    copy->set_owed_from(owed);
  }
  AbsentWorker* added = next.add_absent();
  added->set_index(dead);
  added->set_owed_from(stuck);
  return next;
}

Membership WithPresent(const Membership& membership, int worker, int64_t step) {
  Membership next;
  next.set_from_step(step);
  for (const AbsentWorker& a : membership.absent()) {
    if (a.index() == worker) continue;
    AbsentWorker* copy = next.add_absent();
    copy->set_index(a.index());
    copy->set_owed_from(std::max(a.owed_from(), step));
  }
  return next;
}

Membership RestartedAt(const Membership& membership, int64_t step) {
  Membership next = membership;
  next.set_from_step(step);
  for (AbsentWorker& a : *next.mutable_absent()) a.set_owed_from(step);
  return next;
}

std::vector<BatchRef> CoveredBatches(const Membership& membership, int worker,
                                     int64_t step, int num_workers) {
  std::vector<BatchRef> batches;
  if (step < membership.from_step()) return batches;
  for (const AbsentWorker& a : membership.absent()) {
    if (CoveringWorker(membership, a.index(), num_workers) != worker) continue;
    const int64_t first =
        step == membership.from_step() ? std::min(a.owed_from(), step) : step;
    for (int64_t s = first; s <= step; ++s) batches.push_back({a.index(), s});
  }
  return batches;
}

}  // namespace chief
}  // namespace pstrain
