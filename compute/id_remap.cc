#include "compute/id_remap.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

namespace {

constexpr int kInitialSlotsLog2 = 10;

}  // namespace

IdRemap::IdRemap(int64_t capacity)
    : capacity_(std::clamp<int64_t>(capacity, 1,
                                    std::numeric_limits<int32_t>::max())),
      slots_(size_t{1} << kInitialSlotsLog2, Slot{0, 0, 0}),
      shift_(64 - kInitialSlotsLog2) {}

void IdRemap::Clear() {
  ids_.clear();
  if (++step_ == 0) {  // After 2^32 steps: no slot may look current.
    for (Slot& slot : slots_) slot.step = 0;
    step_ = 1;
  }
}

size_t IdRemap::Probe(int64_t id) const {
  const size_t mask = slots_.size() - 1;
  size_t i = Home(id);
  while (slots_[i].step == step_ && slots_[i].id != id) i = (i + 1) & mask;
  return i;
}

void IdRemap::Grow() {
  slots_.assign(slots_.size() * 2, Slot{0, 0, 0});
  --shift_;
  for (size_t row = 0; row < ids_.size(); ++row) {
    slots_[Probe(ids_[row])] =
        Slot{ids_[row], step_, static_cast<int32_t>(row)};
  }
}

absl::StatusOr<int64_t> IdRemap::Insert(int64_t id) {
  size_t i = Probe(id);
  if (slots_[i].step == step_) return slots_[i].row;
  if (size() >= capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "more than ", capacity_, " distinct ids in one step (id ", id, ")"));
  }
  if (2 * (ids_.size() + 1) > slots_.size()) {
    Grow();
    i = Probe(id);
  }
  const int64_t row = size();
  slots_[i] = Slot{id, step_, static_cast<int32_t>(row)};
  ids_.push_back(id);
  return row;
}

int64_t IdRemap::Find(int64_t id) const {
  const Slot& slot = slots_[Probe(id)];
  return slot.step == step_ ? slot.row : -1;
}

}  // namespace worker
}  // namespace pstrain
