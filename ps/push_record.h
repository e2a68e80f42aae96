// The replies to a shard's latest async pushes, by sender, so that a push
// sent twice (a retry, or a step the worker computes again) is answered
// with the first reply instead of being applied twice. Kept for the 16
// latest pushes of each sender; a sender is a worker, or a worker and a
// table for sparse pushes.
//
//   PushRecord<int, PushDenseResponse> record;
//   if (auto earlier = record.Find(worker, key)) return *earlier;
//   ... check the push ...
//   if (auto earlier = record.Reserve(worker, key, version)) return *earlier;
//   ... apply it, making `response` ...
//   record.Set(worker, key, response);
//
// Thread-safe. Its lock is taken last: nothing else is locked under it.
#ifndef PSTRAIN_PS_PUSH_RECORD_H_
#define PSTRAIN_PS_PUSH_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {
namespace ps {

// Response: a reply with set_version(int64) and set_applied(bool).
template <typename Sender, typename Response>
class PushRecord {
 public:
  static constexpr size_t kKept = 16;

  // The reply recorded for `sender`'s push `key`, if any.
  std::optional<Response> Find(const Sender& sender, uint64_t key) const
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return FindLocked(sender, key);
  }

  // As Find; where nothing is recorded, records the push as applied from
  // `version` (its reply: version + 1, applied) and returns nothing: the
  // caller applies it. Called before applying, so that a copy racing the
  // original is answered as applied rather than applied again.
  std::optional<Response> Reserve(const Sender& sender, uint64_t key,
                                  int64_t version) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (std::optional<Response> earlier = FindLocked(sender, key)) {
      return earlier;
    }
    std::deque<std::pair<uint64_t, Response>>& replies = recent_[sender];
    if (replies.size() >= kKept) replies.pop_front();
    Response pending;
    pending.set_version(version + 1);
    pending.set_applied(true);
    replies.emplace_back(key, std::move(pending));
    return std::nullopt;
  }

  // Replaces the reply recorded for `sender`'s push `key`.
  void Set(const Sender& sender, uint64_t key, const Response& response)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (auto& [id, reply] : recent_[sender]) {
      if (id == key) reply = response;
    }
  }

  // Forgets every push (a restore: steps are trained, and pushed, again).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    recent_.clear();
  }

 private:
  std::optional<Response> FindLocked(const Sender& sender, uint64_t key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = recent_.find(sender);
    if (it == recent_.end()) return std::nullopt;
    for (const auto& [id, reply] : it->second) {
      if (id == key) return reply;
    }
    return std::nullopt;
  }

  mutable absl::Mutex mu_;
  std::map<Sender, std::deque<std::pair<uint64_t, Response>>> recent_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_PUSH_RECORD_H_
