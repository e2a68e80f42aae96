#include "data/criteo_prefetcher.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace data {

absl::StatusOr<std::unique_ptr<CriteoPrefetcher>> CriteoPrefetcher::Start(
    std::unique_ptr<CriteoReader> reader, int queue_depth) {
  if (reader == nullptr) {
    return absl::InvalidArgumentError("CriteoPrefetcher: no reader");
  }
  if (queue_depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CriteoPrefetcher queue_depth is ", queue_depth, "; must be >= 1"));
  }
  std::unique_ptr<CriteoPrefetcher> prefetcher(
      new CriteoPrefetcher(std::move(reader), queue_depth));
  prefetcher->thread_ = std::thread([p = prefetcher.get()] { p->Run(); });
  return prefetcher;
}

CriteoPrefetcher::CriteoPrefetcher(std::unique_ptr<CriteoReader> reader,
                                   int queue_depth)
    : reader_(std::move(reader)) {
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < queue_depth + 2; ++i) {
    buffers_.push_back(std::make_unique<CriteoBatch>());
    free_.push_back(buffers_.back().get());
  }
}

CriteoPrefetcher::~CriteoPrefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CriteoPrefetcher::Run() {
  for (;;) {
    CriteoBatch* batch = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto can_take = [this] {
        mu_.AssertReaderHeld();
        return stop_ || !free_.empty();
      };
      mu_.Await(absl::Condition(&can_take));
      if (stop_) return;
      batch = free_.back();
      free_.pop_back();
    }
    // Outside the lock: the slow part.
    absl::StatusOr<bool> more = reader_->Next(batch);
    const int64_t bad_lines = reader_->bad_lines();
    absl::MutexLock lock(&mu_);
    bad_lines_ = bad_lines;
    if (more.ok() && *more) {
      ready_.push_back(batch);
      continue;
    }
    free_.push_back(batch);
    error_ = more.status();
    done_ = true;
    return;
  }
}

absl::StatusOr<CriteoBatch*> CriteoPrefetcher::Next() {
  absl::MutexLock lock(&mu_);
  const int total = static_cast<int>(buffers_.size());
  auto can_answer = [this, total] {
    mu_.AssertReaderHeld();
    return !ready_.empty() || done_ || held_ == total;
  };
  mu_.Await(absl::Condition(&can_answer));
  if (!ready_.empty()) {
    CriteoBatch* batch = ready_.front();
    ready_.pop_front();
    ++held_;
    return batch;
  }
  if (!error_.ok()) return error_;
  if (done_) return nullptr;
  return absl::FailedPreconditionError(
      absl::StrCat("CriteoPrefetcher: the caller holds all ", total,
                   " batches; Release one before the next Next"));
}

void CriteoPrefetcher::Release(CriteoBatch* batch) {
  if (batch == nullptr) return;
  absl::MutexLock lock(&mu_);
  --held_;
  free_.push_back(batch);
}

int64_t CriteoPrefetcher::bad_lines() const {
  absl::MutexLock lock(&mu_);
  return bad_lines_;
}

}  // namespace data
}  // namespace pstrain
