#include "parallel/ring_group_collective.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "collective/ring_plan.h"
#include "common/status_macros.h"

namespace pstrain {
namespace parallel {

absl::Status RingGroupCollective::RingAllReduce(absl::Span<float> values) {
  // Segments do not depend on the chunk size: any one gives the same plan.
  const int64_t n = static_cast<int64_t>(values.size());
  PSTRAIN_ASSIGN_OR_RETURN(
      const collective::RingPlan plan,
      collective::RingPlan::Make(size_, n, std::max<int64_t>(n, 1)));
  int64_t sent = 0, received = 0;
  for (int step = 0; step < plan.num_steps(); ++step) {
    sent += plan.SegmentLength(plan.SendSegment(rank_, step));
    received += plan.SegmentLength(plan.ReceiveSegment(rank_, step));
  }
  sent *= sizeof(float);
  received *= sizeof(float);
  const absl::Status status = ring_->AllReduce(next_id_++, values);
  // Counted only once the ring has moved them all.
  if (!status.ok()) return status;
  bytes_sent_ += sent;
  bytes_received_ += received;
  if (sent_counter_ != nullptr) sent_counter_->Increment(sent);
  if (received_counter_ != nullptr) received_counter_->Increment(received);
  return status;
}

absl::Status RingGroupCollective::AllReduceSum(absl::Span<float> values) {
  return RingAllReduce(values);
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
  return RingAllReduce(gathered);
}

}  // namespace parallel
}  // namespace pstrain
