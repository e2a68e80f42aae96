#include "ps/embedding_table.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ps/initializer.h"

namespace pstrain {
namespace ps {
namespace {

int64_t Width(const VariableDef& def) {
  int64_t width = 1;
  for (int i = 1; i < def.shape().dims_size(); ++i) width *= def.shape().dims(i);
  return width;
}

absl::Status CheckDef(const VariableDef& def) {
  if (def.shape().dims_size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable '", def.name(), "': an embedding table needs rank >= 2"));
  }
  return CheckInitializer(def);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::CreateGrowing(
    const VariableDef& def, int bucket, int num_buckets,
    const Optimizer* optimizer) {
  absl::Status ok = CheckDef(def);
  if (!ok.ok()) return ok;
  return std::unique_ptr<EmbeddingTable>(new EmbeddingTable(
      def, /*growing=*/true, bucket, num_buckets, 0, 0, optimizer));
}

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::CreateFixed(
    const VariableDef& def, int64_t row_begin, int64_t row_end,
    const Optimizer* optimizer) {
  absl::Status ok = CheckDef(def);
  if (!ok.ok()) return ok;
  auto table = std::unique_ptr<EmbeddingTable>(new EmbeddingTable(
      def, /*growing=*/false, 0, 1, row_begin, row_end, optimizer));
  absl::MutexLock lock(&table->mu_);
  for (int64_t id = row_begin; id < row_end; ++id) table->RowIndex(id);
  return table;
}

EmbeddingTable::EmbeddingTable(const VariableDef& def, bool growing,
                               int bucket, int num_buckets, int64_t row_begin,
                               int64_t row_end, const Optimizer* optimizer)
    : def_(def),
      growing_(growing),
      bucket_(bucket),
      num_buckets_(num_buckets),
      row_begin_(row_begin),
      row_end_(row_end),
      width_(Width(def)),
      optimizer_(optimizer),
      num_arrays_(1 + optimizer->NumSlots()) {}

int64_t EmbeddingTable::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return version_;
}

int64_t EmbeddingTable::num_rows() const {
  absl::ReaderMutexLock lock(&mu_);
  return rows_;
}

int64_t EmbeddingTable::bytes_held() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(blocks_.size()) * kRowsPerBlock * width_ *
         num_arrays_ * sizeof(float);
}

int64_t EmbeddingTable::slot_bytes() const {
  return bytes_held() / num_arrays_ * (num_arrays_ - 1);
}

std::string EmbeddingTable::ArrayName(int array) const {
  if (array == 0) return name();
  return absl::StrCat(name(), "/", optimizer_->SlotName(array - 1));
}

int64_t EmbeddingTable::Snapshot(std::vector<int64_t>* ids,
                                 std::vector<std::vector<float>>* arrays) const {
  absl::ReaderMutexLock lock(&mu_);
  ids->clear();
  if (growing_) {
    for (const auto& [id, index] : index_) ids->push_back(id);
    std::sort(ids->begin(), ids->end());
  } else {
    for (int64_t id = row_begin_; id < row_end_; ++id) ids->push_back(id);
  }
  arrays->assign(num_arrays_, {});
  for (int a = 0; a < num_arrays_; ++a) {
    std::vector<float>& out = (*arrays)[a];
    out.resize(ids->size() * width_);
    for (size_t i = 0; i < ids->size(); ++i) {
      const float* row = Row(a, FindRow((*ids)[i]));
      std::copy(row, row + width_, out.begin() + i * width_);
    }
  }
  return version_;
}

void EmbeddingTable::Restore(const std::vector<int64_t>& ids,
                             const std::vector<std::vector<float>>& arrays,
                             int64_t version) {
  absl::MutexLock sum_lock(&sum_mu_);
  absl::MutexLock lock(&mu_);
  if (growing_) {
    index_.clear();
    rows_ = 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t index = RowIndex(ids[i]);
    for (int a = 0; a < num_arrays_; ++a) {
      std::copy(arrays[a].begin() + i * width_,
                arrays[a].begin() + (i + 1) * width_, Row(a, index));
    }
  }
  version_ = version;
  ++interruptions_;
  interruption_ = "it was restored from a checkpoint";
  sums_.clear();
  step_.Reset();
}

absl::Status EmbeddingTable::CheckIds(absl::Span<const int64_t> ids) const {
  for (int64_t id : ids) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", name(), "': id ", id, " is negative"));
    }
    if (growing_ && id % num_buckets_ != bucket_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", name(), "': id ", id, " belongs to bucket ",
          id % num_buckets_, " of ", num_buckets_, ", not this ps's bucket ",
          bucket_));
    }
    if (!growing_ && (id < row_begin_ || id >= row_end_)) {
      const int64_t vocabulary = def_.shape().dims(0);
      if (id >= vocabulary) {
        return absl::OutOfRangeError(absl::StrCat(
            "variable '", name(), "': id ", id, " is outside the vocabulary of ",
            vocabulary, " rows"));
      }
      return absl::OutOfRangeError(absl::StrCat(
          "variable '", name(), "': id ", id, " is outside rows [", row_begin_,
          ", ", row_end_, ") held by this ps"));
    }
  }
  return absl::OkStatus();
}

void EmbeddingTable::AddBlock() {
  std::vector<std::unique_ptr<float[]>> block;
  for (int a = 0; a < num_arrays_; ++a) {
    block.emplace_back(new float[kRowsPerBlock * width_]);
  }
  blocks_.push_back(std::move(block));
}

float* EmbeddingTable::Row(int array, int64_t index) const {
  return blocks_[index / kRowsPerBlock][array].get() +
         (index % kRowsPerBlock) * width_;
}

int64_t EmbeddingTable::FindRow(int64_t id) const {
  if (!growing_) return id - row_begin_;
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

int64_t EmbeddingTable::RowIndex(int64_t id) {
  if (growing_) {
    auto [it, inserted] = index_.emplace(id, rows_);
    if (!inserted) return it->second;
  } else if (id - row_begin_ < rows_) {
    return id - row_begin_;
  }
  const int64_t index = rows_++;
  if (index / kRowsPerBlock >= static_cast<int64_t>(blocks_.size())) AddBlock();
  FillRows(def_, id, 1, Row(0, index));
  for (int s = 0; s < optimizer_->NumSlots(); ++s) {
    float* slot = Row(1 + s, index);
    std::fill(slot, slot + width_, optimizer_->SlotInitialValue(s));
  }
  return index;
}

absl::StatusOr<int64_t> EmbeddingTable::Read(absl::Span<const int64_t> ids,
                                             int64_t min_version,
                                             absl::Time deadline, float* out) {
  int64_t interruptions = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    interruptions = interruptions_;
  }
  auto ready = [this, min_version,
                interruptions]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return version_ >= min_version || interruptions_ != interruptions;
  };
  // Exclusive: reading may create rows of a growing table.
  const bool done =
      mu_.LockWhenWithDeadline(absl::Condition(&ready), deadline);
  if (interruptions_ != interruptions) {
    const std::string why = interruption_;
    mu_.Unlock();
    return absl::AbortedError(absl::StrCat(
        "variable '", name(), "': a pull waiting for version ", min_version,
        " gave up: ", why));
  }
  if (!done) {
    const int64_t version = version_;
    mu_.Unlock();
    return absl::DeadlineExceededError(absl::StrCat(
        "variable '", name(), "': step ", version,
        " did not complete before the deadline (waiting for version ",
        min_version, ")"));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(out + i * width_, Row(0, RowIndex(ids[i])),
                width_ * sizeof(float));
  }
  const int64_t version = version_;
  mu_.Unlock();
  return version;
}

void EmbeddingTable::ApplyRowsLocked(absl::Span<const int64_t> ids,
                                     const float* g, float scale) {
  thread_local std::vector<float> scaled;
  scaled.resize(width_);
  std::vector<float*> slots(num_arrays_ - 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t index = RowIndex(ids[i]);
    for (int64_t j = 0; j < width_; ++j) scaled[j] = g[i * width_ + j] * scale;
    for (size_t s = 0; s < slots.size(); ++s) slots[s] = Row(1 + s, index);
    optimizer_->Apply(absl::MakeSpan(Row(0, index), width_), scaled, slots,
                      version_ + 1);
  }
  ++version_;
}

int64_t EmbeddingTable::ApplyAsync(absl::Span<const int64_t> ids,
                                   const float* g, int64_t batch_size) {
  absl::MutexLock lock(&mu_);
  ApplyRowsLocked(ids, g, 1.0f / static_cast<float>(batch_size));
  return version_;
}

bool EmbeddingTable::AccumulateSync(int64_t version,
                                    absl::Span<const int64_t> ids,
                                    const float* g,
                                    const Contribution& contribution) {
  absl::MutexLock sum_lock(&sum_mu_);
  if (version != this->version()) return false;
  switch (step_.Take(contribution)) {
    case SyncStep::Outcome::kAdded:
      break;
    case SyncStep::Outcome::kCountedBefore:
      return true;  // counted already (the step completes as it did)
    case SyncStep::Outcome::kAbsent:
      return false;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float>& sum = sums_[ids[i]];
    if (sum.empty()) sum.assign(width_, 0.0f);
    for (int64_t j = 0; j < width_; ++j) sum[j] += g[i * width_ + j];
  }
  if (step_.complete()) CompleteStepLocked();
  return true;
}

void EmbeddingTable::Interrupt(const std::string& why) {
  absl::MutexLock lock(&mu_);
  ++interruptions_;
  interruption_ = why;
}

void EmbeddingTable::SetWorkers(int needed, absl::Span<const int> absent) {
  absl::MutexLock sum_lock(&sum_mu_);
  step_.SetWorkers(needed, absent);
  if (step_.complete()) CompleteStepLocked();
}

void EmbeddingTable::CompleteStepLocked() {
  std::vector<int64_t> touched;
  std::vector<float> rows;
  const bool skip_update = step_.skip_update();
  if (!skip_update) {
    // Sorted, so the update does not depend on hash-map order.
    for (const auto& [id, sum] : sums_) touched.push_back(id);
    std::sort(touched.begin(), touched.end());
    for (int64_t id : touched) {
      rows.insert(rows.end(), sums_[id].begin(), sums_[id].end());
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (skip_update || step_.batch_sum() == 0) {
      ++version_;
    } else {
      ApplyRowsLocked(touched, rows.data(),
                      1.0f / static_cast<float>(step_.batch_sum()));
    }
  }
  sums_.clear();
  step_.Next();
}

}  // namespace ps
}  // namespace pstrain
