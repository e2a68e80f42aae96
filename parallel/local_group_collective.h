// GroupCollective (group_collective.h) among threads of one process: the M
// members of a LocalGroup meet at each collective, the last to arrive
// computes the result (a sum added in member order), and each copies it
// out. For tests of tensor-parallel
// execution without processes.
//
//   LocalGroup group(2);
//   std::thread t0([&] { Run(group.Member(0).get()); });
//   std::thread t1([&] { Run(group.Member(1).get()); });
//
// A member that calls with another length or another collective than the
// others gets INVALID_ARGUMENT, and so do the others of that round. Cancel
// makes every waiting and later call return the given error (a member whose
// thread failed would otherwise leave the others waiting forever).
// Thread-safe: one member object per thread.
#ifndef PSTRAIN_PARALLEL_LOCAL_GROUP_COLLECTIVE_H_
#define PSTRAIN_PARALLEL_LOCAL_GROUP_COLLECTIVE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "parallel/group_collective.h"

namespace pstrain {
namespace parallel {

class LocalGroup {
 public:
  // REQUIRES: size >= 1.
  explicit LocalGroup(int size);

  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int size() const { return size_; }

  // Member `rank`'s collective; it must not outlive the group.
  // REQUIRES: 0 <= rank < size().
  std::unique_ptr<GroupCollective> Member(int rank);

  // Every call waiting now or made later returns `error`. REQUIRES: !ok().
  void Cancel(absl::Status error) ABSL_LOCKS_EXCLUDED(mu_);

  enum class Op { kAllReduceSum, kAllGather };
  // The round's work for member `rank`: `in` its contribution, `out` where
  // its result goes (for kAllReduceSum, in and out are the same buffer).
  absl::Status Run(Op op, int rank, absl::Span<const float> in,
                   absl::Span<float> out) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Fills result_ from the contributions; sets round_error_.
  void Combine() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int size_;
  absl::Mutex mu_;
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  // The round in progress: members arrive (contributions recorded), the last
  // combines, then members leave (copying results); the next round starts
  // when all have left.
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int left_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Span<const float>> inputs_ ABSL_GUARDED_BY(mu_);
  std::vector<float> result_ ABSL_GUARDED_BY(mu_);
  absl::Status round_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_LOCAL_GROUP_COLLECTIVE_H_
