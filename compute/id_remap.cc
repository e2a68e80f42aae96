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
  rows_.clear();
  ids_.clear();
}

absl::StatusOr<int64_t> IdRemap::Insert(int64_t id) {
  auto it = rows_.find(id);
  if (it != rows_.end()) return it->second;
  if (size() >= capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "more than ", capacity_, " distinct ids in one step (id ", id, ")"));
  }
  const int64_t row = size();
  rows_.emplace(id, row);
  ids_.push_back(id);
  return row;
}

int64_t IdRemap::Find(int64_t id) const {
  auto it = rows_.find(id);
  return it == rows_.end() ? -1 : it->second;
}

}  // namespace worker
}  // namespace pstrain
