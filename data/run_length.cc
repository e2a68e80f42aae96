#include "data/run_length.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace data {

ShardOptions RunShardOptions(const TrainingConfig& config, int num_workers,
                             int worker_index) {
  ShardOptions options;
  options.num_workers = num_workers;
  options.worker_index = worker_index;
  options.batch_size = config.batch_size_per_worker();
  options.drop_remainder = true;
  options.shuffle = true;
  options.seed = config.seed();
  return options;
}

absl::StatusOr<RunLength> ComputeRunLength(const TrainingConfig& config,
                                           int num_workers,
                                           int64_t num_examples) {
  PSTRAIN_ASSIGN_OR_RETURN(
      ShardPlan plan,
      ShardPlan::Create(num_examples, RunShardOptions(config, num_workers, 0)));
  RunLength length;
  length.steps_per_epoch = plan.steps_per_epoch();
  if (length.steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_examples, " examples do not fill one step of ", num_workers,
        " workers x batch ", config.batch_size_per_worker()));
  }
  length.total_steps = config.steps() > 0
                           ? config.steps()
                           : config.epochs() * length.steps_per_epoch;
  return length;
}

}  // namespace data
}  // namespace pstrain
