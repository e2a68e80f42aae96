#include "parallel/local_group_collective.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace parallel {
namespace {

class LocalMember : public GroupCollective {
 public:
  LocalMember(LocalGroup* group, int rank) : group_(group), rank_(rank) {}

  int size() const override { return group_->size(); }
  int rank() const override { return rank_; }

  absl::Status AllReduceSum(absl::Span<float> values) override {
    return group_->Run(LocalGroup::Op::kAllReduceSum, rank_, values, values);
  }

  absl::Status AllGather(absl::Span<const float> piece,
                         absl::Span<float> gathered) override {
    if (gathered.size() != piece.size() * group_->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AllGather: member ", rank_, " gives a piece of ", piece.size(),
          " floats but room for ", gathered.size(), " (expected ",
          piece.size() * group_->size(), ")"));
    }
    return group_->Run(LocalGroup::Op::kAllGather, rank_, piece, gathered);
  }

 private:
  LocalGroup* const group_;
  const int rank_;
};

}  // namespace

LocalGroup::LocalGroup(int size)
    : size_(size), ops_(size), inputs_(size) {}

std::unique_ptr<GroupCollective> LocalGroup::Member(int rank) {
  return std::make_unique<LocalMember>(this, rank);
}

void LocalGroup::Cancel(absl::Status error) {
  absl::MutexLock lock(&mu_);
  cancelled_ = std::move(error);
}

void LocalGroup::Combine() {
  round_error_ = absl::OkStatus();
  const size_t n = inputs_[0].size();
  for (int r = 1; r < size_; ++r) {
    if (ops_[r] != ops_[0] || inputs_[r].size() != n) {
      round_error_ = absl::InvalidArgumentError(absl::StrCat(
          "group collective: member ", r, " called ",
          ops_[r] == Op::kAllReduceSum ? "AllReduceSum" : "AllGather",
          " with ", inputs_[r].size(), " floats, member 0 ",
          ops_[0] == Op::kAllReduceSum ? "AllReduceSum" : "AllGather",
          " with ", n));
      return;
    }
  }
  if (ops_[0] == Op::kAllReduceSum) {
    result_.assign(inputs_[0].begin(), inputs_[0].end());
    for (int r = 1; r < size_; ++r) {
      for (size_t i = 0; i < n; ++i) result_[i] += inputs_[r][i];
    }
  } else {
    result_.resize(n * size_);
    for (int r = 0; r < size_; ++r) {
      std::copy(inputs_[r].begin(), inputs_[r].end(), result_.begin() + r * n);
    }
  }
}

absl::Status LocalGroup::Run(Op op, int rank, absl::Span<const float> in,
                             absl::Span<float> out) {
  absl::MutexLock lock(&mu_);
  auto can_arrive = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !leaving_ || !cancelled_.ok();
  };
  mu_.Await(absl::Condition(&can_arrive));
  if (!cancelled_.ok()) return cancelled_;
  ops_[rank] = op;
  inputs_[rank] = in;
  if (++arrived_ == size_) {
    Combine();
    leaving_ = true;
  } else {
    auto combined = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return leaving_ || !cancelled_.ok();
    };
    mu_.Await(absl::Condition(&combined));
    if (!leaving_) return cancelled_;
  }
  // The members' inputs are read; results go out (out may alias in).
  absl::Status status = round_error_;
  if (status.ok()) std::copy(result_.begin(), result_.end(), out.begin());
  if (++left_ == size_) {
    arrived_ = 0;
    left_ = 0;
    leaving_ = false;
  }
  return status;
}

}  // namespace parallel
}  // namespace pstrain
