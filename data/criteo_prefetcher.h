// Runs a CriteoReader (criteo_reader.h) in a background thread, so that
// reading, decompressing and parsing the next batches overlaps training on
// the current one.
//
// Batches are allocated once (queue_depth ready, one being filled, one held
// by the caller) and recycled: the caller hands each back with Release.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CriteoPrefetcher> batches,
//                            CriteoPrefetcher::Start(std::move(reader)));
//   for (;;) {
//     PSTRAIN_ASSIGN_OR_RETURN(CriteoBatch* batch, batches->Next());
//     if (batch == nullptr) break;  // The pass is over.
//     Step(*batch);
//     resume_line = batch->next_line;
//     batches->Release(batch);
//   }
//
// Thread-safety: Next and Release may be called from any thread; batches
// come out in the reader's order. The destructor stops and joins the thread
// whether or not the batches were consumed; batches not yet released are
// invalid after it. REQUIRES: no Next call is in progress during
// destruction.
#ifndef PSTRAIN_DATA_CRITEO_PREFETCHER_H_
#define PSTRAIN_DATA_CRITEO_PREFETCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "data/criteo_reader.h"

namespace pstrain {
namespace data {

class CriteoPrefetcher {
 public:
  // Starts the thread on `reader`. INVALID_ARGUMENT unless queue_depth >= 1
  // and `reader` is not null.
  static absl::StatusOr<std::unique_ptr<CriteoPrefetcher>> Start(
      std::unique_ptr<CriteoReader> reader, int queue_depth = 2);

  ~CriteoPrefetcher() ABSL_LOCKS_EXCLUDED(mu_);
  CriteoPrefetcher(const CriteoPrefetcher&) = delete;
  CriteoPrefetcher& operator=(const CriteoPrefetcher&) = delete;

  // The next batch, blocking until it is ready, or nullptr once the pass is
  // over; the caller owns it until Release. The reader's error (after the
  // batches before it), then the same error at every later call;
  // FAILED_PRECONDITION, rather than a deadlock, when the caller holds every
  // buffer.
  absl::StatusOr<CriteoBatch*> Next() ABSL_LOCKS_EXCLUDED(mu_);

  // Returns `batch` for reuse. REQUIRES: it came from this Next and was not
  // released since. Release(nullptr) does nothing.
  void Release(CriteoBatch* batch) ABSL_LOCKS_EXCLUDED(mu_);

  // The reader's skipped malformed lines (BadLines::kSkip) in the batches
  // read so far, which may be ahead of those handed out.
  int64_t bad_lines() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  CriteoPrefetcher(std::unique_ptr<CriteoReader> reader, int queue_depth);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const std::unique_ptr<CriteoReader> reader_;         // Used by Run only.
  std::vector<std::unique_ptr<CriteoBatch>> buffers_;  // Fixed after Start.

  mutable absl::Mutex mu_;
  std::vector<CriteoBatch*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<CriteoBatch*> ready_ ABSL_GUARDED_BY(mu_);
  int held_ ABSL_GUARDED_BY(mu_) = 0;       // Buffers the caller holds.
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // Run has returned its last.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;  // The destructor wants Run out.
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int64_t bad_lines_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_PREFETCHER_H_
