#include "compute/id_remap.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

IdRemap::IdRemap(int64_t capacity) : capacity_(std::max<int64_t>(1, capacity)) {
  rows_.reserve(capacity_);
  ids_.reserve(capacity_);
}

void IdRemap::Clear() {
  // The next step has about as many distinct ids: room for them at once
  // (clear() frees a large map's array, which would then grow by doubling,
  // rehashing each time).
  const size_t seen = ids_.size();
  rows_.clear();
  rows_.reserve(seen);
  ids_.clear();
}

absl::StatusOr<int64_t> IdRemap::Insert(int64_t id) {
  if (size() >= capacity_) {
    const int64_t row = Find(id);
    if (row >= 0) return row;
    return absl::ResourceExhaustedError(absl::StrCat(
        "more than ", capacity_, " distinct ids in one step (id ", id, ")"));
  }
  // One probe of the map, for a known id and a new one alike.
  const auto [it, inserted] = rows_.try_emplace(id, size());
  if (inserted) ids_.push_back(id);
  return it->second;
}

int64_t IdRemap::Find(int64_t id) const {
  auto it = rows_.find(id);
  return it == rows_.end() ? -1 : it->second;
}

}  // namespace worker
}  // namespace pstrain
