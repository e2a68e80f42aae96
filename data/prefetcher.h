// Prepares one worker's batches in a background thread, ahead of training.
//
// The Prefetcher walks epochs first_epoch, first_epoch + 1, ... of a
// ShardPlan and, for each step, gathers that batch's examples from a Dataset
// into float32 features (uint8 pixels scaled to [0, 1]), or int32 ids for a
// dataset of ids (FeedDtype), and int32 labels.
// Batch buffers are allocated (and their pages touched) once, in Create, and
// recycled: the caller hands each batch back with Release.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Prefetcher> prefetcher,
//                            Prefetcher::Create(&dataset, plan, options));
//   for (;;) {
//     absl::StatusOr<Batch*> batch = prefetcher->Next();
//     if (absl::IsOutOfRange(batch.status())) break;  // All epochs done.
//     PSTRAIN_RETURN_IF_ERROR(batch.status());
//     Step((*batch)->features, (*batch)->labels);
//     const bool epoch_done = (*batch)->end_of_epoch;
//     prefetcher->Release(*batch);
//     if (epoch_done) Evaluate();
//   }
//
// Buffers: queue_depth + 2 batches of the first step's size (queue_depth
// ready, one being filled, one held by the caller), plus 2 of the last step's
// size when it differs, so that every Batch has its exact shape.
//
// Thread-safety: Next and Release may be called from any thread; batches come
// out in step order. The destructor stops and joins the background thread
// whether or not the batches were consumed, and never waits for the caller;
// batches not yet released are invalid after it. REQUIRES: no Next call is in
// progress during destruction; the Dataset outlives the Prefetcher.
#ifndef PSTRAIN_DATA_PREFETCHER_H_
#define PSTRAIN_DATA_PREFETCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/tensor.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/shard_plan.h"

namespace pstrain {
namespace data {

struct PrefetchOptions {
  static constexpr int64_t kRepeatForever = -1;

  int queue_depth = 2;      // Batches ready ahead of the caller, >= 1.
  int64_t first_epoch = 0;  // Where a resumed run starts.
  int64_t num_epochs = 1;   // >= 1, or kRepeatForever.
};

class Prefetcher : public BatchSource {
 public:
  // Starts the background thread. INVALID_ARGUMENT when `dataset` fails
  // ValidateDataset, its size is not plan.num_examples(), the plan has no
  // steps (e.g. fewer examples than one batch per worker when dropping the
  // remainder), or the options are out of range.
  static absl::StatusOr<std::unique_ptr<Prefetcher>> Create(
      const Dataset* dataset, const ShardPlan& plan,
      const PrefetchOptions& options);

  ~Prefetcher() override ABSL_LOCKS_EXCLUDED(mu_);
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch, blocking until it is ready; the caller owns it until
  // Release. OUT_OF_RANGE after the last epoch's last batch;
  // FAILED_PRECONDITION, rather than a deadlock, when the caller holds every
  // buffer the next batch could use.
  absl::StatusOr<Batch*> Next() override ABSL_LOCKS_EXCLUDED(mu_);

  // Returns `batch` for reuse. REQUIRES: `batch` came from this Next and was
  // not released since. Release(nullptr) does nothing.
  void Release(Batch* batch) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Free buffers of one row count.
  struct Pool {
    int64_t rows = 0;
    int64_t capacity = 0;
    std::vector<Batch*> free;
  };

  Prefetcher(const Dataset* dataset, const ShardPlan& plan,
             const PrefetchOptions& options);
  absl::Status Allocate(int64_t rows, int count);
  // The index in pools_ of the pool of `rows`, or -1.
  int PoolFor(int64_t rows) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // A free buffer of `rows`, waiting for one; nullptr once stopping.
  Batch* TakeFree(int64_t rows) ABSL_LOCKS_EXCLUDED(mu_);
  bool CallerHoldsAll() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Dataset* const dataset_;
  const ShardPlan plan_;
  const PrefetchOptions options_;
  std::vector<std::unique_ptr<Batch>> buffers_;  // Fixed after Create.

  mutable absl::Mutex mu_;
  std::vector<Pool> pools_ ABSL_GUARDED_BY(mu_);
  std::deque<Batch*> ready_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;      // The last batch is in ready_.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;      // The destructor wants Run out.
  int starved_pool_ ABSL_GUARDED_BY(mu_) = -1;  // Pool Run waits on, or -1.
  std::thread thread_;
};

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_PREFETCHER_H_
