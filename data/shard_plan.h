// Which examples one worker trains on at each step of each epoch, so that
// across W workers every example is used at most once per epoch (exactly once
// when the remainder is kept) and every worker takes the same number of steps,
// as synchronous training needs.
//
// Epoch e visits the N examples in the order EpochPermutation(N, seed, e)
// (0..N-1 when not shuffling). Step s of the cluster consumes the global
// batch of positions [s*W*B, (s+1)*W*B) of that order, and worker w's batch
// is its w-th block of B: positions [s*W*B + w*B, s*W*B + (w+1)*B). So
// example j of worker w's batch is example w*B + j of the global batch, as
// it is in one process training on the global batch, and what is keyed by
// that index (dropout's masks: StepInput::example_offset = w*B) is the same
// however the global batch is split.
//
// When W*B does not divide N:
//   drop_remainder: steps_per_epoch = floor(N / (W*B)); every batch is full;
//     the last N mod (W*B) positions of the order (different examples each
//     shuffled epoch) are skipped by every worker, as TensorFlow's
//     drop_remainder skips a short final batch.
//   keep (the default): steps_per_epoch = ceil(N / (W*B)); the last global
//     batch has R = N - (steps-1)*W*B examples, cut into the same blocks of
//     B: worker w's last batch has min(B, max(0, R - w*B)) of them (the
//     first workers' blocks are full, then one partial, then empty ones), so
//     its examples keep their places in the global batch. A worker with an
//     empty batch still takes part in that step (contributing nothing) so
//     all workers stay in step.
//
//   ShardOptions options;
//   options.num_workers = 3;
//   options.worker_index = 1;
//   options.batch_size = 128;
//   options.seed = run_seed;
//   PSTRAIN_ASSIGN_OR_RETURN(ShardPlan plan, ShardPlan::Create(60000,
//   options)); std::vector<int64_t> mine = plan.WorkerOrder(epoch); int64_t
//   begin = 0; for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) {
//     Train(absl::MakeSpan(mine).subspan(begin, plan.BatchSize(s)));
//     begin += plan.BatchSize(s);
//   }
//
// A ShardPlan is immutable: safe for concurrent use.
#ifndef PSTRAIN_DATA_SHARD_PLAN_H_
#define PSTRAIN_DATA_SHARD_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {
namespace data {

struct ShardOptions {
  int num_workers = 1;      // W >= 1.
  int worker_index = 0;     // w in [0, W).
  int64_t batch_size = 32;  // B >= 1: examples per worker per step.
  bool drop_remainder = false;
  bool shuffle = true;
  uint64_t seed = 0;  // The run's seed: the same on every worker.
};

class ShardPlan {
 public:
  // INVALID_ARGUMENT naming the field unless num_examples >= 0 and the
  // options are in the ranges above.
  static absl::StatusOr<ShardPlan> Create(int64_t num_examples,
                                          const ShardOptions& options);

  int64_t num_examples() const { return num_examples_; }
  const ShardOptions& options() const { return options_; }

  // Steps every worker takes per epoch (see the header comment).
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

  // Examples per epoch that no worker sees: N mod (W*B) when dropping the
  // remainder, 0 when keeping it.
  int64_t dropped_per_epoch() const;

  // Examples in this worker's batch at `step`: batch_size, except perhaps at
  // the last step when keeping the remainder (possibly 0).
  // REQUIRES: 0 <= step < steps_per_epoch().
  int64_t BatchSize(int64_t step) const;

  // This worker's examples for `epoch` in the order it trains on them: the
  // batch at step s is the BatchSize(s) elements after those of steps < s.
  std::vector<int64_t> WorkerOrder(int64_t epoch) const;

 private:
  ShardPlan(int64_t num_examples, const ShardOptions& options);

  int64_t num_examples_;
  ShardOptions options_;
  int64_t steps_per_epoch_;
  int64_t worker_examples_;  // This worker's examples per epoch.
};

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_SHARD_PLAN_H_
