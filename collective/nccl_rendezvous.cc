#include "collective/nccl_rendezvous.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#ifdef PSTRAIN_WITH_CUDA
#include "collective/nccl_gradient_reducer.h"
#endif

namespace pstrain {
namespace collective {

absl::StatusOr<std::unique_ptr<NcclRendezvous>> NcclRendezvous::Create(
    NcclRendezvousOptions options) {
  if (options.num_ranks < 1 || options.rank < 0 ||
      options.rank >= options.num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL rendezvous: rank ", options.rank,
                     " is outside [0, ", options.num_ranks, ")"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "NCCL rendezvous: the timeout must be > 0");
  }
  if (options.rank == 0 ? options.publish == nullptr
                        : options.fetch == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL rendezvous: rank ", options.rank, " needs a ",
        options.rank == 0 ? "publish" : "fetch", " function"));
  }
#ifdef PSTRAIN_WITH_CUDA
  return std::unique_ptr<NcclRendezvous>(
      new NcclRendezvous(std::move(options)));
#else
  return absl::UnimplementedError(
      "NCCL all-reduce: this worker was built without CUDA");
#endif
}

NcclRendezvous::~NcclRendezvous() { Shutdown(); }

absl::StatusOr<std::string> NcclRendezvous::IdFor(int64_t generation) {
#ifdef PSTRAIN_WITH_CUDA
  if (options_.rank == 0) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string id,
                             NcclGradientReducer::NewUniqueId());
    PSTRAIN_RETURN_IF_ERROR(options_.publish(generation, id));
    return id;
  }
#endif
  const absl::Time deadline = absl::Now() + options_.timeout;
  for (;;) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string id, options_.fetch(generation));
    if (!id.empty()) return id;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "NCCL rendezvous: worker 0 published no id for generation ",
          generation, " within ", absl::FormatDuration(options_.timeout)));
    }
    absl::SleepFor(options_.poll);
  }
}

absl::Status NcclRendezvous::Join(int64_t generation) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError("NCCL rendezvous: shut down");
    }
    if (current_ != nullptr && joined_generation_ == generation) {
      return absl::OkStatus();
    }
    // The last communicator first: its GPU buffers and sockets go.
    if (current_ != nullptr) current_->Shutdown();
    current_.reset();
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string id, IdFor(generation));
#ifdef PSTRAIN_WITH_CUDA
  NcclGradientReducerOptions options;
  options.gpu = options_.gpu;
  options.rank = options_.rank;
  options.num_ranks = options_.num_ranks;
  options.unique_id = id;
  options.dtype = options_.dtype;
  options.timeout = options_.timeout;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<NcclGradientReducer> joined,
                           NcclGradientReducer::Create(options));
  absl::MutexLock lock(&mu_);
  if (shut_down_) joined->Shutdown();
  current_ = std::move(joined);
  joined_generation_ = generation;
#endif
  return absl::OkStatus();
}

absl::Status NcclRendezvous::AllReduce(
    uint64_t id, absl::Span<const absl::Span<float>> tensors) {
  std::shared_ptr<AllReducer> current;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
  }
  if (current == nullptr) {
    return absl::FailedPreconditionError(
        "NCCL rendezvous: no communicator joined");
  }
  return current->AllReduce(id, tensors);
}

void NcclRendezvous::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  if (current_ != nullptr) current_->Shutdown();
}

}  // namespace collective
}  // namespace pstrain
