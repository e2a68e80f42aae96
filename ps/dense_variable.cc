#include "ps/dense_variable.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/initializer.h"

namespace pstrain {
namespace ps {
namespace {

int64_t NumFloats(const Chunk& chunk) { return chunk.data.size() / 4; }

// Float i of a chunk, read whatever its alignment (loops of these
// vectorize with unaligned loads).
float FloatAt(const Chunk& chunk, int64_t i) {
  float f;
  std::memcpy(&f, chunk.data.data() + 4 * i, 4);
  return f;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DenseVariable>> DenseVariable::Create(
    const VariableDef& def, int64_t row_begin, int64_t row_end,
    const Optimizer* optimizer) {
  absl::Status init = CheckInitializer(def);
  if (!init.ok()) return init;
  std::vector<int64_t> shape(def.shape().dims().begin(),
                             def.shape().dims().end());
  if (!shape.empty()) shape[0] = row_end - row_begin;
  absl::StatusOr<Tensor> value = Tensor::Create(DT_FLOAT, std::move(shape));
  if (!value.ok()) {
    return absl::Status(value.status().code(),
                        absl::StrCat("variable '", def.name(),
                                     "': ", value.status().message()));
  }
  if (value->num_elements() > 0) {
    FillRows(def, row_begin, row_end - row_begin, value->data<float>());
  }
  std::vector<Tensor> slots;
  for (int i = 0; i < optimizer->NumSlots(); ++i) {
    // Created, not cloned: no memory is an error here, not an abort.
    absl::StatusOr<Tensor> slot = Tensor::Create(DT_FLOAT, value->shape());
    if (!slot.ok()) {
      return absl::Status(slot.status().code(),
                          absl::StrCat("variable '", def.name(),
                                       "': ", slot.status().message()));
    }
    std::fill(slot->flat<float>().begin(), slot->flat<float>().end(),
              optimizer->SlotInitialValue(i));
    slots.push_back(*std::move(slot));
  }
  return std::unique_ptr<DenseVariable>(new DenseVariable(
      def, row_begin, row_end, optimizer, *std::move(value), std::move(slots)));
}

DenseVariable::DenseVariable(const VariableDef& def, int64_t row_begin,
                             int64_t row_end, const Optimizer* optimizer,
                             Tensor value, std::vector<Tensor> slots)
    : def_(def),
      row_begin_(row_begin),
      row_end_(row_end),
      optimizer_(optimizer),
      num_bytes_(value.num_bytes()),
      value_(std::make_shared<Tensor>(std::move(value))),
      slots_(std::move(slots)) {
  for (Tensor& slot : slots_) slot_data_.push_back(slot.data<float>());
  slot_scratch_.resize(slot_data_.size());
}

int64_t DenseVariable::bytes_held() const {
  absl::MutexLock sum_lock(&sum_mu_);
  return num_bytes() * (1 + optimizer_->NumSlots()) +
         static_cast<int64_t>(sum_.size() * sizeof(double));
}

int64_t DenseVariable::slot_bytes() const {
  return num_bytes() * optimizer_->NumSlots();
}

int64_t DenseVariable::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return version_;
}

std::string DenseVariable::ArrayName(int array) const {
  if (array == 0) return name();
  return absl::StrCat(name(), "/", optimizer_->SlotName(array - 1));
}

int64_t DenseVariable::ReadArrays(
    const std::function<void(int, const char*, int64_t)>& save) const {
  absl::ReaderMutexLock lock(&mu_);
  save(0, static_cast<const char*>(value_->raw_data()), num_bytes_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    save(1 + i, static_cast<const char*>(slots_[i].raw_data()),
         slots_[i].num_bytes());
  }
  return version_;
}

void DenseVariable::Restore(const std::vector<std::string>& arrays,
                            int64_t version) {
  absl::MutexLock sum_lock(&sum_mu_);
  absl::MutexLock lock(&mu_);
  std::memcpy(MutableValueLocked().data(), arrays[0].data(), num_bytes_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    std::memcpy(slots_[i].raw_data(), arrays[1 + i].data(),
                slots_[i].num_bytes());
  }
  version_ = version;
  interruptions_.Add("it was restored from a checkpoint");
  sum_started_ = false;
  ClearCoverageLocked();
  step_.Reset();
}

absl::StatusOr<int64_t> DenseVariable::Read(
    int64_t min_version, absl::Time deadline, int needed,
    const std::function<void(const ValueView&)>& read) const {
  int64_t seen = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    seen = interruptions_.count();
  }
  auto ready = [this, min_version, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return version_ >= min_version || interruptions_.count() != seen;
  };
  int64_t version = 0;
  {
    const bool done =
        mu_.ReaderLockWhenWithDeadline(absl::Condition(&ready), deadline);
    version = version_;
    const absl::Status gave_up =
        interruptions_.count() != seen
            ? interruptions_.GaveUp(name(), min_version)
            : absl::OkStatus();
    if (done && gave_up.ok()) {
      ValueView value;
      value.version = version_;
      value.data = static_cast<const char*>(value_->raw_data());
      value.size = num_bytes_;
      if (num_bytes_ <= kMaxLentBytes) value.owner = value_;
      read(value);
    }
    mu_.ReaderUnlock();
    if (!gave_up.ok()) return gave_up;
    if (done) return version;
  }
  int arrived;
  {
    absl::MutexLock sum_lock(&sum_mu_);
    arrived = step_.contributions();
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "variable '", name(), "': step ", version, " did not complete: ", arrived,
      " of ", needed, " gradients arrived before the deadline (waiting for "
      "version ", min_version, ")"));
}

absl::Span<float> DenseVariable::MutableValueLocked() {
  // Only Read, under the shared lock, adds owners: with the exclusive lock
  // held, a count of 1 stays 1. A count above 1 may be stale (a pull just
  // let go): that costs a needless copy, never a change under a pull.
  if (value_.use_count() > 1) value_ = std::make_shared<Tensor>(value_->Clone());
  return value_->flat<float>();
}

void DenseVariable::UpdateLocked(int64_t first, const ScaledGradient& g) {
  for (size_t s = 0; s < slot_data_.size(); ++s) {
    slot_scratch_[s] = slot_data_[s] + first;
  }
  optimizer_->Apply(MutableValueLocked().subspan(first, g.size()), g,
                    slot_scratch_, version_ + 1);
}

void DenseVariable::UpdateLocked(absl::Span<const Chunk> chunks, float scale) {
  for (const Chunk& chunk : chunks) {
    UpdateLocked(chunk.offset / 4,
                 ScaledGradient(chunk.data.data(), NumFloats(chunk), scale));
  }
}

int64_t DenseVariable::ApplyAsync(int64_t batch_size,
                                  absl::Span<const Chunk> chunks) {
  // Scaled as the optimizer reads it: one pass over the gradient and the
  // value.
  const float inverse_batch = 1.0f / static_cast<float>(batch_size);
  absl::MutexLock lock(&mu_);
  UpdateLocked(chunks, inverse_batch);
  return ++version_;
}

DenseVariable::Accumulated DenseVariable::AccumulateSync(
    int64_t version, absl::Span<const Chunk> chunks,
    const Contribution& contribution, const DensePart* part) {
  absl::MutexLock sum_lock(&sum_mu_);
  if (version != this->version()) return Accumulated::kDropped;
  switch (step_.Take(contribution)) {
    case SyncStep::Outcome::kAdded:
      break;
    case SyncStep::Outcome::kCountedBefore:
      return Accumulated::kCountedBefore;  // the step completes as it did
    case SyncStep::Outcome::kAbsent:
      return Accumulated::kDropped;
  }
  // The last push of a step of whole pushes is added as the update reads
  // the sum: a pass over the sum less.
  if (part == nullptr && !parts_in_step_ && step_.complete()) {
    CompleteStepLocked(chunks);
    return Accumulated::kAdded;
  }
  if (sum_.empty()) sum_.resize(num_bytes() / 4);
  if (part == nullptr) {
    // The chunks cover the piece (checked before).
    whole_batch_ += contribution.batch_size;
    for (const Chunk& chunk : chunks) {
      double* sum = sum_.data() + chunk.offset / 4;
      const int64_t n = NumFloats(chunk);
      if (sum_started_) {
        for (int64_t i = 0; i < n; ++i) sum[i] += FloatAt(chunk, i);
      } else {
        for (int64_t i = 0; i < n; ++i) sum[i] = FloatAt(chunk, i);
      }
    }
  } else {
    if (!sum_started_) std::fill(sum_.begin(), sum_.end(), 0.0);
    const PartRows rows = PartRowsOnPiece(*part, def_, row_begin_, row_end_);
    for (const Chunk& chunk : chunks) {
      const int64_t first = chunk.offset / 4;
      const int64_t n = NumFloats(chunk);
      for (int64_t i = 0; i < n; ++i) {
        sum_[PieceIndex(*part, def_, row_begin_, rows, first + i)] +=
            FloatAt(chunk, i);
      }
    }
    if (!parts_in_step_) {
      parts_in_step_ = true;
      dim_batch_.assign(def_.shape().dims_size(), {});
    }
    std::vector<int64_t>& batch = dim_batch_[part->dim];
    if (part->dim == 0) {
      // The part's rows on the piece, as piece rows.
      batch.resize(row_end_ - row_begin_, 0);
      const int64_t first_row = part->begin + rows.begin - row_begin_;
      for (int64_t r = rows.begin; r < rows.end; ++r) {
        batch[first_row + r - rows.begin] += contribution.batch_size;
      }
    } else {
      batch.resize(def_.shape().dims(part->dim), 0);
      for (int64_t c = part->begin; c < part->end; ++c) {
        batch[c] += contribution.batch_size;
      }
    }
  }
  sum_started_ = true;
  if (step_.complete()) CompleteStepLocked();
  return Accumulated::kAdded;
}

void DenseVariable::Interrupt(const std::string& why) {
  absl::MutexLock lock(&mu_);
  interruptions_.Add(why);
}

void DenseVariable::SetWorkers(int needed, absl::Span<const int> absent) {
  absl::MutexLock sum_lock(&sum_mu_);
  if (step_.SetWorkers(needed, absent)) CompleteStepLocked();
}

void DenseVariable::CompleteStepLocked(absl::Span<const Chunk> last) {
  {
    absl::MutexLock lock(&mu_);
    if (!step_.skip_update()) ApplySumLocked(last);
    ++version_;
  }
  sum_started_ = false;
  ClearCoverageLocked();
  step_.Next();
}

void DenseVariable::ApplySumLocked(absl::Span<const Chunk> last) {
  const float inverse_batch = step_.batch_sum() > 0
                                  ? 1.0f / static_cast<float>(step_.batch_sum())
                                  : 1.0f;
  if (!sum_started_) {
    // `last` is the step's one push (a step completes only once it holds
    // one: SyncStep::complete): applied as an async push is.
    UpdateLocked(last, inverse_batch);
    return;
  }
  // g = (sum [+ last]) / global batch (element by element when parts were
  // pushed), the sum rounded to float once, a block at a time: the block is
  // still in the L1 cache when the optimizer reads it.
  constexpr int64_t kBlock = 4096;
  float g[kBlock];
  for (const Chunk& chunk : last) {
    const int64_t first = chunk.offset / 4;
    const int64_t n = NumFloats(chunk);
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      const int64_t size = std::min(kBlock, n - begin);
      const double* sum = sum_.data() + first + begin;
      for (int64_t i = 0; i < size; ++i) {
        g[i] = static_cast<float>(sum[i] + FloatAt(chunk, begin + i)) *
               inverse_batch;
      }
      UpdateLocked(first + begin, ScaledGradient(absl::MakeConstSpan(g, size)));
    }
  }
  if (!last.empty()) return;
  const int64_t n = static_cast<int64_t>(sum_.size());
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t size = std::min(kBlock, n - begin);
    for (int64_t i = 0; i < size; ++i) {
      const float sum = static_cast<float>(sum_[begin + i]);
      g[i] = parts_in_step_ ? sum * InverseCoverageLocked(begin + i)
                            : sum * inverse_batch;
    }
    UpdateLocked(begin, ScaledGradient(absl::MakeConstSpan(g, size)));
  }
}

float DenseVariable::InverseCoverageLocked(int64_t i) const {
  // Element i's index of dimension d is i / inner[d] % size[d] (the piece's
  // row for d = 0).
  const int rank = static_cast<int>(dim_batch_.size());
  int64_t divisor = whole_batch_;
  int64_t inner = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t size = d == 0 ? row_end_ - row_begin_ : def_.shape().dims(d);
    if (!dim_batch_[d].empty()) divisor += dim_batch_[d][i / inner % size];
    inner *= size;
  }
  // An element no contribution covered has a zero sum: it stays zero.
  return divisor > 0 ? 1.0f / static_cast<float>(divisor) : 0.0f;
}

void DenseVariable::ClearCoverageLocked() {
  parts_in_step_ = false;
  whole_batch_ = 0;
  dim_batch_.clear();
}

}  // namespace ps
}  // namespace pstrain
