#include "data/prefetcher.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace data {

absl::StatusOr<std::unique_ptr<Prefetcher>> Prefetcher::Create(
    const Dataset* dataset, const ShardPlan& plan,
    const PrefetchOptions& options) {
  if (dataset == nullptr) {
    return absl::InvalidArgumentError("Prefetcher: no dataset");
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateDataset(*dataset));
  if (dataset->size() != plan.num_examples()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Prefetcher: dataset has ", dataset->size(),
        " examples but the shard plan was made for ", plan.num_examples()));
  }
  if (plan.steps_per_epoch() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Prefetcher: the shard plan has no steps: ", plan.num_examples(),
        " examples give no batch of ", plan.options().batch_size,
        " for each of ", plan.options().num_workers, " workers",
        plan.options().drop_remainder ? " with drop_remainder" : ""));
  }
  if (options.queue_depth < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PrefetchOptions.queue_depth is ", options.queue_depth,
                     "; must be >= 1"));
  }
  if (options.num_epochs < 1 &&
      options.num_epochs != PrefetchOptions::kRepeatForever) {
    return absl::InvalidArgumentError(
        absl::StrCat("PrefetchOptions.num_epochs is ", options.num_epochs,
                     "; must be >= 1 or kRepeatForever"));
  }
  std::unique_ptr<Prefetcher> prefetcher(
      new Prefetcher(dataset, plan, options));
  // Every batch has BatchSize(0) rows but perhaps the last.
  const int64_t steps = plan.steps_per_epoch();
  PSTRAIN_RETURN_IF_ERROR(
      prefetcher->Allocate(plan.BatchSize(0), options.queue_depth + 2));
  if (plan.BatchSize(steps - 1) != plan.BatchSize(0)) {
    PSTRAIN_RETURN_IF_ERROR(prefetcher->Allocate(plan.BatchSize(steps - 1), 2));
  }
  prefetcher->thread_ = std::thread([p = prefetcher.get()] { p->Run(); });
  return prefetcher;
}

Prefetcher::Prefetcher(const Dataset* dataset, const ShardPlan& plan,
                       const PrefetchOptions& options)
    : dataset_(dataset), plan_(plan), options_(options) {}

Prefetcher::~Prefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status Prefetcher::Allocate(int64_t rows, int count) {
  std::vector<int64_t> shape = dataset_->features.shape();
  shape[0] = rows;
  absl::MutexLock lock(&mu_);
  Pool pool;
  pool.rows = rows;
  pool.capacity = count;
  for (int i = 0; i < count; ++i) {
    auto batch = std::make_unique<Batch>();
    PSTRAIN_ASSIGN_OR_RETURN(batch->features,
                             Tensor::Create(FeedDtype(*dataset_), shape));
    PSTRAIN_ASSIGN_OR_RETURN(batch->labels, Tensor::Create(DT_INT32, {rows}));
    batch->indices.resize(rows);
    pool.free.push_back(batch.get());
    buffers_.push_back(std::move(batch));
  }
  pools_.push_back(std::move(pool));
  return absl::OkStatus();
}

int Prefetcher::PoolFor(int64_t rows) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i].rows == rows) return static_cast<int>(i);
  }
  return -1;
}

void Prefetcher::Run() {
  const int64_t steps = plan_.steps_per_epoch();
  for (int64_t e = 0; options_.num_epochs == PrefetchOptions::kRepeatForever ||
                      e < options_.num_epochs;
       ++e) {
    const int64_t epoch = options_.first_epoch + e;
    const std::vector<int64_t> order = plan_.WorkerOrder(epoch);
    int64_t begin = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t rows = plan_.BatchSize(step);
      Batch* batch = TakeFree(rows);
      if (batch == nullptr) return;
      batch->epoch = epoch;
      batch->step = step;
      batch->end_of_epoch = step == steps - 1;
      std::copy(order.begin() + begin, order.begin() + begin + rows,
                batch->indices.begin());
      begin += rows;
      GatherExamples(*dataset_, batch->indices, batch->features.raw_data());
      int32_t* labels = batch->labels.data<int32_t>();
      for (int64_t i = 0; i < rows; ++i) {
        labels[i] = dataset_->labels[batch->indices[i]];
      }
      absl::MutexLock lock(&mu_);
      ready_.push_back(batch);
    }
  }
  absl::MutexLock lock(&mu_);
  done_ = true;
}

Batch* Prefetcher::TakeFree(int64_t rows) {
  absl::MutexLock lock(&mu_);
  const int index = PoolFor(rows);
  Pool& pool = pools_[index];
  auto can_take = [this, &pool] {
    mu_.AssertReaderHeld();
    return stop_ || !pool.free.empty();
  };
  if (pool.free.empty()) starved_pool_ = index;
  mu_.Await(absl::Condition(&can_take));
  starved_pool_ = -1;
  if (stop_) return nullptr;
  Batch* batch = pool.free.back();
  pool.free.pop_back();
  return batch;
}

bool Prefetcher::CallerHoldsAll() const {
  // Run waits for a buffer, none is free and none is ready: the caller holds
  // every one.
  return ready_.empty() && starved_pool_ >= 0 &&
         pools_[starved_pool_].free.empty();
}

absl::StatusOr<Batch*> Prefetcher::Next() {
  absl::MutexLock lock(&mu_);
  auto can_answer = [this] {
    mu_.AssertReaderHeld();
    return !ready_.empty() || done_ || CallerHoldsAll();
  };
  mu_.Await(absl::Condition(&can_answer));
  if (!ready_.empty()) {
    Batch* batch = ready_.front();
    ready_.pop_front();
    return batch;
  }
  if (done_) {
    return absl::OutOfRangeError(absl::StrCat(
        "end of data: epochs ", options_.first_epoch, " to ",
        options_.first_epoch + options_.num_epochs - 1, " are done"));
  }
  const Pool& pool = pools_[starved_pool_];
  return absl::FailedPreconditionError(
      absl::StrCat("the caller holds all ", pool.capacity, " batch buffers of ",
                   pool.rows, " rows; Release one before calling Next again"));
}

void Prefetcher::Release(Batch* batch) {
  if (batch == nullptr) return;
  absl::MutexLock lock(&mu_);
  const int index = PoolFor(batch->size());
  bool owned = false;
  for (const std::unique_ptr<Batch>& buffer : buffers_) {
    owned = owned || buffer.get() == batch;
  }
  const auto holds = [batch](const auto& list) {
    return std::find(list.begin(), list.end(), batch) != list.end();
  };
  if (index < 0 || !owned || holds(pools_[index].free) || holds(ready_)) {
    std::fprintf(stderr,
                 "pstrain: Prefetcher::Release of a batch it did not hand "
                 "out, or released twice\n");
    std::abort();
  }
  pools_[index].free.push_back(batch);
}

}  // namespace data
}  // namespace pstrain
