// The chief's settings for the dense optimizer, from its --optimizer,
// --learning_rate, --momentum, --nesterov, --beta_1, --beta_2, --epsilon,
// --initial_accumulator_value and --weight_decay flags, turned into the
// OptimizerConfig the ps tasks apply (ps/optimizer.h).
//
//   OptimizerSettings settings = ...;  // from flags, in main.cc
//   PSTRAIN_ASSIGN_OR_RETURN(OptimizerConfig optimizer,
//                            ChooseOptimizer(settings));
#ifndef PSTRAIN_CHIEF_OPTIMIZER_SETTINGS_H_
#define PSTRAIN_CHIEF_OPTIMIZER_SETTINGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace chief {

struct OptimizerSettings {
  // sgd, momentum, adagrad or adam.
  std::string name = "adam";
  // > 0; 0 picks Keras's default for `name` (0.01 for sgd and momentum,
  // 0.001 for adagrad and adam).
  double learning_rate = 0;
  double momentum = 0.9;
  bool nesterov = false;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  double initial_accumulator_value = 0.1;
  double weight_decay = 0;
};

// The config of settings.name with the settings, each checked as the ps
// tasks will. The other optimizers' settings are checked too: a bad value is
// refused whether or not this run uses it. INVALID_ARGUMENT names the flag
// and its range ("--beta_1: 1.5 must be in [0, 1)").
absl::StatusOr<OptimizerConfig> ChooseOptimizer(
    const OptimizerSettings& settings);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_OPTIMIZER_SETTINGS_H_
