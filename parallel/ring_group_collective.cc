#include "parallel/ring_group_collective.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace parallel {

absl::Status RingGroupCollective::AllReduceSum(absl::Span<float> values) {
  return ring_->AllReduce(next_id_++, values);
}

absl::Status RingGroupCollective::AllGather(absl::Span<const float> piece,
                                            absl::Span<float> gathered) {
  if (gathered.size() != piece.size() * size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AllGather: member ", rank_, " gives a piece of ", piece.size(),
        " floats but room for ", gathered.size(), " (expected ",
        piece.size() * size_, ")"));
  }
  std::fill(gathered.begin(), gathered.end(), 0.0f);
  std::copy(piece.begin(), piece.end(),
            gathered.begin() + rank_ * piece.size());
  return ring_->AllReduce(next_id_++, gathered);
}

}  // namespace parallel
}  // namespace pstrain
