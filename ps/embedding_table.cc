#include "ps/embedding_table.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

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

absl::Status CheckDef(const VariableDef& def, bool growing) {
  if (def.shape().dims_size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable '", def.name(), "': an embedding table needs rank >= 2"));
  }
  if (def.has_lifecycle()) {
    if (!growing) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", def.name(),
          "': a lifecycle applies to growing tables (shape[0] 0) only"));
    }
    const VariableDef::Lifecycle& lifecycle = def.lifecycle();
    const std::pair<const char*, int64_t> fields[] = {
        {"min_count", lifecycle.min_count()},
        {"ttl_steps", lifecycle.ttl_steps()},
        {"max_rows", lifecycle.max_rows()}};
    for (const auto& [field, value] : fields) {
      if (value < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("variable '", def.name(), "': lifecycle.", field, ": ",
                         value, " must be >= 0"));
      }
    }
  }
  return CheckInitializer(def);
}

// How many rows (or pending counts) one eviction removes at a cap of
// `max_rows`: a tenth, so that selections are amortized over many creations.
int64_t EvictionBatch(int64_t max_rows) {
  return std::max<int64_t>(1, max_rows / 10);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::CreateGrowing(
    const VariableDef& def, int bucket, int num_buckets,
    const Optimizer* optimizer) {
  absl::Status ok = CheckDef(def, /*growing=*/true);
  if (!ok.ok()) return ok;
  return std::unique_ptr<EmbeddingTable>(new EmbeddingTable(
      def, /*growing=*/true, bucket, num_buckets, 0, 0, optimizer));
}

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::CreateFixed(
    const VariableDef& def, int64_t row_begin, int64_t row_end,
    const Optimizer* optimizer) {
  absl::Status ok = CheckDef(def, /*growing=*/false);
  if (!ok.ok()) return ok;
  auto table = std::unique_ptr<EmbeddingTable>(new EmbeddingTable(
      def, /*growing=*/false, 0, 1, row_begin, row_end, optimizer));
  absl::MutexLock lock(&table->mu_);
  for (int64_t id = row_begin; id < row_end; ++id) table->RowIndex(id);
  return table;
}

EmbeddingTable::EmbeddingTable(const VariableDef& def, bool growing, int bucket,
                               int num_buckets, int64_t row_begin,
                               int64_t row_end, const Optimizer* optimizer)
    : def_(def),
      growing_(growing),
      bucket_(bucket),
      num_buckets_(num_buckets),
      row_begin_(row_begin),
      row_end_(row_end),
      width_(Width(def)),
      optimizer_(optimizer),
      num_arrays_(1 + optimizer->NumSlots()),
      has_lifecycle_(growing && def.has_lifecycle()),
      min_count_(growing ? std::max<int64_t>(1, def.lifecycle().min_count())
                         : 1),
      ttl_steps_(growing ? def.lifecycle().ttl_steps() : 0),
      max_rows_(growing ? def.lifecycle().max_rows() : 0),
      big_shift_(BigShift(std::max<int64_t>(width_, 1))) {}

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
  return BlockStart(blocks_.size()) * width_ * num_arrays_ * sizeof(float);
}

int64_t EmbeddingTable::slot_bytes() const {
  return bytes_held() / num_arrays_ * (num_arrays_ - 1);
}

int64_t EmbeddingTable::bytes_per_row() const {
  int64_t bytes = width_ * num_arrays_ * static_cast<int64_t>(sizeof(float));
  if (growing_) {
    // Lifecycle data, id, and the index's slot (key, value, control byte).
    bytes += sizeof(RowMeta) + sizeof(int64_t) +
             sizeof(std::pair<int64_t, int64_t>) + 1;
  }
  return bytes;
}

int64_t EmbeddingTable::metadata_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(
      ids_.capacity() * sizeof(int64_t) + meta_.capacity() * sizeof(RowMeta) +
      index_.capacity() * (sizeof(std::pair<int64_t, int64_t>) + 1) +
      pending_.capacity() * (sizeof(std::pair<int64_t, RowMeta>) + 1));
}

int64_t EmbeddingTable::num_pending() const {
  absl::ReaderMutexLock lock(&mu_);
  return pending_.size();
}

int64_t EmbeddingTable::rows_expired() const {
  absl::ReaderMutexLock lock(&mu_);
  return rows_expired_;
}

int64_t EmbeddingTable::rows_evicted() const {
  absl::ReaderMutexLock lock(&mu_);
  return rows_evicted_;
}

std::string EmbeddingTable::ArrayName(int array) const {
  if (array == 0) return name();
  return absl::StrCat(name(), "/", optimizer_->SlotName(array - 1));
}

int64_t EmbeddingTable::Snapshot(std::vector<int64_t>* ids,
                                 std::vector<std::vector<float>>* arrays,
                                 RowStats* stats) const {
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
  if (stats != nullptr) {
    *stats = RowStats();
    if (growing_) {
      for (int64_t id : *ids) {
        const RowMeta& meta = meta_[FindRow(id)];
        stats->counts.push_back(meta.count);
        stats->last_updates.push_back(meta.last_update);
      }
      for (const auto& [id, meta] : pending_) stats->pending_ids.push_back(id);
      std::sort(stats->pending_ids.begin(), stats->pending_ids.end());
      for (int64_t id : stats->pending_ids) {
        const RowMeta& meta = pending_.at(id);
        stats->pending_counts.push_back(meta.count);
        stats->pending_last_seen.push_back(meta.last_update);
      }
    }
  }
  return version_;
}

void EmbeddingTable::Restore(const std::vector<int64_t>& ids,
                             const std::vector<std::vector<float>>& arrays,
                             int64_t version, const RowStats* stats) {
  absl::MutexLock sum_lock(&sum_mu_);
  absl::MutexLock lock(&mu_);
  if (growing_) {
    index_.clear();
    ids_.clear();
    meta_.clear();
    pending_.clear();
    rows_ = 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    // No eviction while restoring: the rows' counts are not set yet. The
    // cap is applied once they are.
    const int64_t index = RowIndex(ids[i], /*may_evict=*/false);
    for (int a = 0; a < num_arrays_; ++a) {
      std::copy(arrays[a].begin() + i * width_,
                arrays[a].begin() + (i + 1) * width_, Row(a, index));
    }
    if (growing_) {
      meta_[index] = stats != nullptr
                         ? RowMeta{stats->counts[i], stats->last_updates[i]}
                         : RowMeta{0, version};
    }
  }
  if (growing_ && stats != nullptr) {
    for (size_t i = 0; i < stats->pending_ids.size(); ++i) {
      pending_[stats->pending_ids[i]] =
          RowMeta{stats->pending_counts[i], stats->pending_last_seen[i]};
    }
  }
  if (max_rows_ > 0) {
    EvictLocked(max_rows_);
    TrimPendingLocked(max_rows_);
  }
  next_sweep_ = 0;
  version_ = version;
  interruptions_.Add("it was restored from a checkpoint");
  ClearSumsLocked();
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

int EmbeddingTable::BigShift(int64_t width) {
  int shift = 0;
  while ((kRowsPerBlock << shift) * width *
             static_cast<int64_t>(sizeof(float)) <
         static_cast<int64_t>(kHugePageBytes)) {
    ++shift;
  }
  return shift;
}

int64_t EmbeddingTable::BlockStart(size_t block) const {
  const int64_t doubling = big_shift_ + 1;  // blocks before the first big one
  if (static_cast<int64_t>(block) <= doubling) {
    return kRowsPerBlock * ((int64_t{1} << block) - 1);
  }
  return kRowsPerBlock * ((int64_t{1} << doubling) - 1) +
         (static_cast<int64_t>(block) - doubling) *
             (kRowsPerBlock << big_shift_);
}

void EmbeddingTable::AddBlock() {
  const size_t b = blocks_.size();
  const int64_t floats = (BlockStart(b + 1) - BlockStart(b)) * width_;
  std::vector<HugeArray<float>> block;
  for (int a = 0; a < num_arrays_; ++a) {
    block.push_back(NewHugeArray<float>(floats));  // rows written on creation
  }
  blocks_.push_back(std::move(block));
}

std::pair<int64_t, int64_t> EmbeddingTable::Locate(int64_t index) const {
  const int doubling = big_shift_ + 1;
  const int64_t doubling_end = BlockStart(doubling);
  if (index < doubling_end) {
    // Block b < doubling starts at kRowsPerBlock * (2^b - 1).
    const int64_t block = 63 - __builtin_clzll(index / kRowsPerBlock + 1);
    return {block, index - BlockStart(block)};
  }
  const int64_t past = index - doubling_end;
  const int big_log2 = kLog2RowsPerBlock + big_shift_;
  return {doubling + (past >> big_log2), past & ((int64_t{1} << big_log2) - 1)};
}

float* EmbeddingTable::Row(int array, int64_t index) {
  const auto [block, offset] = Locate(index);
  return blocks_[block][array].get() + offset * width_;
}

const float* EmbeddingTable::Row(int array, int64_t index) const {
  const auto [block, offset] = Locate(index);
  return blocks_[block][array].get() + offset * width_;
}

int64_t EmbeddingTable::FindRow(int64_t id) const {
  if (!growing_) return id - row_begin_;
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

int64_t EmbeddingTable::RowIndex(int64_t id, bool may_evict) {
  if (growing_) {
    auto it = index_.find(id);
    if (it != index_.end()) return it->second;
    if (may_evict && max_rows_ > 0 && rows_ >= max_rows_) {
      EvictLocked(max_rows_ - EvictionBatch(max_rows_));
    }
    index_.emplace(id, rows_);
    ids_.push_back(id);
    meta_.push_back(RowMeta{0, version_});
  } else if (id - row_begin_ < rows_) {
    return id - row_begin_;
  }
  const int64_t index = rows_++;
  if (index >= BlockStart(blocks_.size())) AddBlock();
  FillRows(def_, id, 1, Row(0, index));
  for (int s = 0; s < optimizer_->NumSlots(); ++s) {
    float* slot = Row(1 + s, index);
    std::fill(slot, slot + width_, optimizer_->SlotInitialValue(s));
  }
  return index;
}

void EmbeddingTable::RemoveRowsLocked(std::vector<int64_t> indices) {
  // Highest first: the last row moved into a hole is never one still to be
  // removed (those above it are gone already).
  std::sort(indices.begin(), indices.end(), std::greater<int64_t>());
  for (const int64_t index : indices) {
    const int64_t last = rows_ - 1;
    index_.erase(ids_[index]);
    if (index != last) {
      for (int a = 0; a < num_arrays_; ++a) {
        std::memcpy(Row(a, index), Row(a, last), width_ * sizeof(float));
      }
      ids_[index] = ids_[last];
      meta_[index] = meta_[last];
      index_[ids_[index]] = index;
    }
    ids_.pop_back();
    meta_.pop_back();
    --rows_;
  }
  // Keep one spare block, so that a table at its cap does not free and
  // allocate a block at every eviction.
  size_t needed = 1;
  while (BlockStart(needed - 1) < rows_) ++needed;
  while (blocks_.size() > needed) blocks_.pop_back();
}

void EmbeddingTable::EvictLocked(int64_t keep) {
  keep = std::max<int64_t>(keep, 0);
  if (rows_ <= keep) return;
  std::vector<int64_t> order(rows_);
  for (int64_t i = 0; i < rows_; ++i) order[i] = i;
  const auto less = [this](int64_t a,
                           int64_t b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::tie(meta_[a].count, meta_[a].last_update, ids_[a]) <
           std::tie(meta_[b].count, meta_[b].last_update, ids_[b]);
  };
  const int64_t evicted = rows_ - keep;
  std::nth_element(order.begin(), order.begin() + evicted, order.end(), less);
  order.resize(evicted);
  rows_evicted_ += evicted;
  RemoveRowsLocked(std::move(order));
}

void EmbeddingTable::TrimPendingLocked(size_t keep) {
  if (pending_.size() <= keep) return;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> order;
  order.reserve(pending_.size());
  for (const auto& [id, meta] : pending_) {
    order.emplace_back(meta.count, meta.last_update, id);
  }
  const size_t dropped = pending_.size() - keep;
  std::nth_element(order.begin(), order.begin() + dropped, order.end());
  for (size_t i = 0; i < dropped; ++i) pending_.erase(std::get<2>(order[i]));
}

void EmbeddingTable::AdvanceVersionLocked() {
  ++version_;
  if (ttl_steps_ <= 0 || version_ < next_sweep_) return;
  next_sweep_ = version_ + std::max<int64_t>(1, ttl_steps_ / 10);
  std::vector<int64_t> expired;
  for (int64_t i = 0; i < rows_; ++i) {
    if (version_ - meta_[i].last_update >= ttl_steps_) expired.push_back(i);
  }
  rows_expired_ += expired.size();
  RemoveRowsLocked(std::move(expired));
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (version_ - it->second.last_update >= ttl_steps_) {
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<int64_t> EmbeddingTable::Read(absl::Span<const int64_t> ids,
                                             int64_t min_version,
                                             absl::Time deadline, float* out,
                                             bool read_only) {
  int64_t seen = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    seen = interruptions_.count();
  }
  auto ready = [this, min_version, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return version_ >= min_version || interruptions_.count() != seen;
  };
  // Exclusive: reading may create rows of a growing table.
  const bool done =
      mu_.LockWhenWithDeadline(absl::Condition(&ready), deadline);
  if (interruptions_.count() != seen) {
    const absl::Status gave_up = interruptions_.GaveUp(name(), min_version);
    mu_.Unlock();
    return gave_up;
  }
  if (!done) {
    const int64_t version = version_;
    mu_.Unlock();
    return absl::DeadlineExceededError(absl::StrCat(
        "variable '", name(), "': step ", version,
        " did not complete before the deadline (waiting for version ",
        min_version, ")"));
  }
  // With admission, a pull does not create the row: zeros until admitted.
  const bool create = !read_only && min_count_ <= 1;
  // A growing table is far larger than the caches, so each id's lookup and
  // then its row would wait for memory in turn: the index entries and the
  // rows a few ids ahead are prefetched. Rows are found first and copied
  // after, unless creating a row may evict others (which moves rows).
  const bool may_move = create && max_rows_ > 0 &&
                        rows_ + static_cast<int64_t>(ids.size()) > max_rows_;
  std::vector<int64_t> indices(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (growing_ && i + kPrefetchAhead < ids.size()) {
      index_.prefetch(ids[i + kPrefetchAhead]);
    }
    indices[i] = create ? RowIndex(ids[i]) : FindRow(ids[i]);
    if (may_move) CopyRowLocked(ids[i], indices[i], out + i * width_);
  }
  for (size_t i = 0; i < ids.size() && !may_move; ++i) {
    if (i + kPrefetchAhead < ids.size() && indices[i + kPrefetchAhead] >= 0) {
      const float* ahead = Row(0, indices[i + kPrefetchAhead]);
      __builtin_prefetch(ahead);
      __builtin_prefetch(ahead + width_ - 1);
    }
    CopyRowLocked(ids[i], indices[i], out + i * width_);
  }
  const int64_t version = version_;
  mu_.Unlock();
  return version;
}

void EmbeddingTable::CopyRowLocked(int64_t id, int64_t index,
                                   float* out) const {
  if (index >= 0) {
    std::memcpy(out, Row(0, index), width_ * sizeof(float));
  } else {
    FillAbsentRow(def_, id, out);
  }
}

void EmbeddingTable::FillAbsentRow(const VariableDef& def, int64_t id,
                                   float* out) {
  if (def.lifecycle().min_count() > 1) {
    std::fill(out, out + Width(def), 0.0f);
  } else {
    FillRows(def, id, 1, out);  // As RowIndex would create it.
  }
}

void EmbeddingTable::ApplyRowsLocked(absl::Span<const int64_t> ids,
                                     const float* g, float scale) {
  std::vector<float*> slots(num_arrays_ - 1);
  // Without admission or eviction a row's place is fixed once found, so the
  // rows are found first and updated after, each row's arrays prefetched a
  // few rows ahead (a growing table is far larger than the caches: else
  // every update waits for its rows' memory in turn).
  const bool rows_stay =
      min_count_ <= 1 &&
      !(max_rows_ > 0 && rows_ + static_cast<int64_t>(ids.size()) > max_rows_);
  if (rows_stay) {
    thread_local std::vector<int64_t> indices;
    indices.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (growing_ && i + kPrefetchAhead < ids.size()) {
        index_.prefetch(ids[i + kPrefetchAhead]);
      }
      indices[i] = RowIndex(ids[i]);
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i + kPrefetchAhead < ids.size()) {
        const int64_t ahead_index = indices[i + kPrefetchAhead];
        for (int a = 0; a < num_arrays_; ++a) {
          const float* ahead = Row(a, ahead_index);
          __builtin_prefetch(ahead, 1);
          __builtin_prefetch(ahead + width_ - 1, 1);
        }
        if (growing_) __builtin_prefetch(&meta_[ahead_index], 1);
      }
      const int64_t index = indices[i];
      if (growing_) {
        RowMeta& meta = meta_[index];
        meta.count += 1;
        meta.last_update = version_ + 1;
      }
      ApplyRowLocked(index, g + i * width_, scale, slots);
    }
    AdvanceVersionLocked();
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (growing_ && i + kPrefetchAhead < ids.size()) {
      index_.prefetch(ids[i + kPrefetchAhead]);
    }
    const int64_t id = ids[i];
    // Updates counted for a row admitted by this update (0: none).
    int64_t admitted = 0;
    if (min_count_ > 1 && FindRow(id) < 0) {
      auto it = pending_.find(id);
      if (it == pending_.end()) {
        if (max_rows_ > 0 &&
            static_cast<int64_t>(pending_.size()) >= max_rows_) {
          TrimPendingLocked(max_rows_ - EvictionBatch(max_rows_));
        }
        it = pending_.emplace(id, RowMeta{0, 0}).first;
      }
      it->second.count += 1;
      it->second.last_update = version_ + 1;
      if (it->second.count < min_count_) continue;  // not admitted: dropped
      admitted = it->second.count;
      pending_.erase(it);
    }
    const int64_t index = RowIndex(id);
    if (growing_) {
      RowMeta& meta = meta_[index];
      meta.count = admitted > 0 ? admitted : meta.count + 1;
      meta.last_update = version_ + 1;
    }
    ApplyRowLocked(index, g + i * width_, scale, slots);
  }
  AdvanceVersionLocked();
}

void EmbeddingTable::ApplyRowLocked(int64_t index, const float* g, float scale,
                                    std::vector<float*>& slots) {
  for (size_t s = 0; s < slots.size(); ++s) slots[s] = Row(1 + s, index);
  optimizer_->Apply(absl::MakeSpan(Row(0, index), width_),
                    ScaledGradient(absl::MakeConstSpan(g, width_), scale),
                    slots, version_ + 1);
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
    if (i + kPrefetchAhead < ids.size()) {
      sum_positions_.prefetch(ids[i + kPrefetchAhead]);
    }
    const auto [it, added] =
        sum_positions_.try_emplace(ids[i], sum_ids_.size());
    if (added) {
      sum_ids_.push_back(ids[i]);
      sum_values_.resize(sum_values_.size() + width_, 0.0);
    }
    double* sum = sum_values_.data() + it->second * width_;
    for (int64_t j = 0; j < width_; ++j) sum[j] += g[i * width_ + j];
  }
  if (step_.complete()) CompleteStepLocked();
  return true;
}

void EmbeddingTable::Interrupt(const std::string& why) {
  absl::MutexLock lock(&mu_);
  interruptions_.Add(why);
}

void EmbeddingTable::SetWorkers(int needed, absl::Span<const int> absent) {
  absl::MutexLock sum_lock(&sum_mu_);
  if (step_.SetWorkers(needed, absent)) CompleteStepLocked();
}

void EmbeddingTable::CompleteStepLocked() {
  std::vector<int64_t> touched;
  std::vector<float> rows;
  const bool skip_update = step_.skip_update();
  if (!skip_update) {
    // Rows are updated each on its own, so their order matters only where
    // admission or eviction may be decided along the way: there by id, so
    // that the update does not depend on the order of the pushes.
    std::vector<int64_t> order(sum_ids_.size());  // positions in the sums
    for (size_t p = 0; p < order.size(); ++p) order[p] = p;
    if (min_count_ > 1 || max_rows_ > 0) {
      const int64_t* const ids = sum_ids_.data();
      std::sort(order.begin(), order.end(),
                [ids](int64_t a, int64_t b) { return ids[a] < ids[b]; });
    }
    touched.reserve(order.size());
    rows.resize(order.size() * width_);
    for (size_t k = 0; k < order.size(); ++k) {
      touched.push_back(sum_ids_[order[k]]);
      const double* sum = sum_values_.data() + order[k] * width_;
      for (int64_t j = 0; j < width_; ++j) {
        rows[k * width_ + j] = static_cast<float>(sum[j]);
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (skip_update || step_.batch_sum() == 0) {
      AdvanceVersionLocked();
    } else {
      ApplyRowsLocked(touched, rows.data(),
                      1.0f / static_cast<float>(step_.batch_sum()));
    }
  }
  ClearSumsLocked();
  step_.Next();
}

void EmbeddingTable::ClearSumsLocked() {
  // The next step touches about as many rows: one allocation instead of a
  // map growing by doubling (clear() frees a large map's array).
  const size_t touched = sum_ids_.size();
  sum_positions_.clear();
  sum_positions_.reserve(touched);
  sum_ids_.clear();
  sum_values_.clear();
}

}  // namespace ps
}  // namespace pstrain
