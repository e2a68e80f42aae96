// How long a run is: its steps per epoch and total steps, from the run's
// settings (TrainingConfig), the number of workers and the number of training
// examples, and how each worker's share of an epoch is cut (RunShardOptions).
// The chief computes it to check a run before starting it and to plan its
// evaluations; every worker computes the same to know where each epoch ends.
//
//   PSTRAIN_ASSIGN_OR_RETURN(
//       data::RunLength length,
//       data::ComputeRunLength(config, num_workers, train.size()));
//   // length.steps_per_epoch, length.total_steps
//
// Every worker does the same number of steps; the remainder of an epoch that
// does not fill a step is dropped (a different one each shuffled epoch:
// data/shard_plan.h).
#ifndef PSTRAIN_DATA_RUN_LENGTH_H_
#define PSTRAIN_DATA_RUN_LENGTH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/shard_plan.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace data {

// Steps per epoch and total steps of a run over `num_examples` training
// examples (every worker does the same number of steps; the remainder of an
// epoch that does not fill a step is dropped, a different one each epoch).
struct RunLength {
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
};

// The shard of worker `worker_index` of `num_workers` in a run with
// `config`: its batch size and seed, shuffled, the remainder dropped.
ShardOptions RunShardOptions(const TrainingConfig& config, int num_workers,
                             int worker_index);

// INVALID_ARGUMENT, naming the counts, when `num_examples` do not fill one
// step of `num_workers` x the batch per worker.
absl::StatusOr<RunLength> ComputeRunLength(const TrainingConfig& config,
                                           int num_workers,
                                           int64_t num_examples);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_RUN_LENGTH_H_
