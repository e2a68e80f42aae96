#include "data/shard_plan.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/shuffle.h"

namespace pstrain {
namespace data {

absl::StatusOr<ShardPlan> ShardPlan::Create(int64_t num_examples,
                                            const ShardOptions& options) {
  if (num_examples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_examples is ", num_examples, "; must be >= 0"));
  }
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShardOptions.num_workers is ", options.num_workers, "; must be >= 1"));
  }
  if (options.worker_index < 0 || options.worker_index >= options.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShardOptions.worker_index is ", options.worker_index,
                     "; must be in 0..", options.num_workers - 1));
  }
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShardOptions.batch_size is ", options.batch_size, "; must be >= 1"));
  }
  return ShardPlan(num_examples, options);
}

ShardPlan::ShardPlan(int64_t num_examples, const ShardOptions& options)
    : num_examples_(num_examples), options_(options) {
  const int64_t n = num_examples, w = options.worker_index,
                workers = options.num_workers, b = options.batch_size;
  // floor(N/(W*B)) = floor(floor(N/W)/B): W*B, which may overflow, is
  // formed only where it is at most N.
  const int64_t full_steps = n / workers / b;
  steps_per_epoch_ = full_steps;
  worker_examples_ = full_steps * b;
  // The last global batch's R examples, when kept, cut into blocks of B:
  // full for the first R / B workers, R mod B for the next, none after.
  const int64_t left = n - full_steps * workers * b;
  if (!options.drop_remainder && left > 0) {
    ++steps_per_epoch_;
    const int64_t full_blocks = left / b;
    worker_examples_ += w < full_blocks ? b : w == full_blocks ? left % b : 0;
  }
}

int64_t ShardPlan::dropped_per_epoch() const {
  if (!options_.drop_remainder) return 0;
  return num_examples_ -
         steps_per_epoch_ * options_.num_workers * options_.batch_size;
}

int64_t ShardPlan::BatchSize(int64_t step) const {
  return std::min(options_.batch_size,
                  worker_examples_ - step * options_.batch_size);
}

std::vector<int64_t> ShardPlan::WorkerOrder(int64_t epoch) const {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = EpochPermutation(num_examples_, options_.seed, epoch);
  } else {
    order.resize(num_examples_);
    for (int64_t i = 0; i < num_examples_; ++i) order[i] = i;
  }
  // Worker w's block of each global batch, in order. (Left to right: the
  // product is 0 before the first full global batch, and at most N after.)
  const int64_t b = options_.batch_size;
  std::vector<int64_t> mine(worker_examples_);
  for (int64_t i = 0; i < worker_examples_; ++i) {
    mine[i] = order[(i / b) * options_.num_workers * b +
                    options_.worker_index * b + i % b];
  }
  return mine;
}

}  // namespace data
}  // namespace pstrain
