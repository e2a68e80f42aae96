// Which workers are absent under --on_worker_failure=continue, and who
// trains their share (proto/chief_service.proto, Membership).
//
// The chief changes the membership when a worker is presumed dead
// (WithAbsent) or comes back (WithPresent), and after a recovery
// (RestartedAt); every worker asks CoveredBatches, at each step, which
// batches of absent workers it trains besides its own. Plain functions of
// plain data.
#ifndef PSTRAIN_CHIEF_MEMBERSHIP_H_
#define PSTRAIN_CHIEF_MEMBERSHIP_H_

#include <cstdint>
#include <vector>

#include "proto/chief_service.pb.h"

namespace pstrain {
namespace chief {

bool IsAbsent(const Membership& membership, int worker);
std::vector<int> AbsentWorkers(const Membership& membership);

// The present worker that trains absent `worker`'s share: the first present
// one after it (worker + 1, + 2, ... modulo num_workers); -1 if none.
int CoveringWorker(const Membership& membership, int worker, int num_workers);

// `dead` is absent from step `stuck + 1`; its batch of step `stuck` (the
// step it did not finish), and that of every absent worker it covered, is
// owed.
Membership WithAbsent(const Membership& membership, int dead, int64_t stuck,
                      int num_workers);

// `worker` trains its own share again from `step`.
Membership WithPresent(const Membership& membership, int worker, int64_t step);

// Training goes on from `step` (a restored checkpoint's): absent workers'
// batches are owed from there.
Membership RestartedAt(const Membership& membership, int64_t step);

// A batch to train: worker `worker`'s batch of step `step`.
struct BatchRef {
  int worker = 0;
  int64_t step = 0;
};

// The batches of absent workers that `worker` trains at `step`, besides its
// own.
std::vector<BatchRef> CoveredBatches(const Membership& membership, int worker,
                                     int64_t step, int num_workers);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_MEMBERSHIP_H_
