#include "chief/optimizer_settings.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace chief {
namespace {

// The optimizer `name` with the settings' values.
absl::StatusOr<OptimizerConfig> OptimizerNamed(
    const std::string& name, const OptimizerSettings& settings) {
  OptimizerConfig optimizer;
  double default_lr = 0.01;
  if (name == "sgd") {
    optimizer.mutable_sgd();
  } else if (name == "momentum") {
    optimizer.mutable_momentum()->set_momentum(settings.momentum);
    optimizer.mutable_momentum()->set_nesterov(settings.nesterov);
  } else if (name == "adagrad") {
    optimizer.mutable_adagrad()->set_initial_accumulator_value(
        settings.initial_accumulator_value);
    optimizer.mutable_adagrad()->set_epsilon(settings.epsilon);
    default_lr = 0.001;
  } else if (name == "adam") {
    optimizer.mutable_adam()->set_beta_1(settings.beta_1);
    optimizer.mutable_adam()->set_beta_2(settings.beta_2);
    optimizer.mutable_adam()->set_epsilon(settings.epsilon);
    default_lr = 0.001;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--optimizer: \"", name, "\" is not sgd, momentum, adagrad or adam"));
  }
  optimizer.set_learning_rate(
      settings.learning_rate == 0 ? default_lr : settings.learning_rate);
  optimizer.set_weight_decay(settings.weight_decay);
  // The config's fields are named after the flags: "adam.beta_1" is
  // --beta_1.
  PSTRAIN_RETURN_IF_ERROR(
      ps::CheckOptimizerConfig(optimizer, [](absl::string_view field) {
        return absl::StrCat("--", field.substr(field.rfind('.') + 1));
      }));
  return optimizer;
}

}  // namespace

absl::StatusOr<OptimizerConfig> ChooseOptimizer(
    const OptimizerSettings& settings) {
  PSTRAIN_ASSIGN_OR_RETURN(OptimizerConfig optimizer,
                           OptimizerNamed(settings.name, settings));
  for (const char* other : {"sgd", "momentum", "adagrad", "adam"}) {
    PSTRAIN_RETURN_IF_ERROR(OptimizerNamed(other, settings).status());
  }
  return optimizer;
}

}  // namespace chief
}  // namespace pstrain
