#include "chief/optimizer_settings.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

TEST(OptimizerSettings, ZeroLearningRateTakesKerasDefaultForEachOptimizer) {
  OptimizerSettings settings;
  for (const auto& [name, lr] : {std::make_pair("sgd", 0.01f),
                                 std::make_pair("momentum", 0.01f),
                                 std::make_pair("adagrad", 0.001f),
                                 std::make_pair("adam", 0.001f)}) {
    settings.name = name;
    absl::StatusOr<OptimizerConfig> config = ChooseOptimizer(settings);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_FLOAT_EQ(config->learning_rate(), lr) << name;
  }
  settings.learning_rate = 0.5;
  EXPECT_FLOAT_EQ(ChooseOptimizer(settings)->learning_rate(), 0.5f);
}

TEST(OptimizerSettings, CarriesEachHyperParameterOfTheChosenOptimizer) {
  OptimizerSettings settings;
  settings.name = "momentum";
  settings.momentum = 0.5;
  settings.nesterov = true;
  settings.weight_decay = 0.25;
  absl::StatusOr<OptimizerConfig> config = ChooseOptimizer(settings);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->has_momentum());
  EXPECT_FLOAT_EQ(config->momentum().momentum(), 0.5f);
  EXPECT_TRUE(config->momentum().nesterov());
  EXPECT_FLOAT_EQ(config->weight_decay(), 0.25f);

  settings.name = "adam";
  settings.beta_1 = 0.8;
  settings.beta_2 = 0.99;
  settings.epsilon = 1e-3;
  config = ChooseOptimizer(settings);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->has_adam());
  EXPECT_FLOAT_EQ(config->adam().beta_1(), 0.8f);
  EXPECT_FLOAT_EQ(config->adam().beta_2(), 0.99f);
  EXPECT_FLOAT_EQ(config->adam().epsilon(), 1e-3f);

  settings.name = "adagrad";
  settings.initial_accumulator_value = 0.3;
  config = ChooseOptimizer(settings);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FLOAT_EQ(config->adagrad().initial_accumulator_value(), 0.3f);
  EXPECT_FLOAT_EQ(config->adagrad().epsilon(), 1e-3f);
}

TEST(OptimizerSettings, RefusalsNameTheFlagEvenForAnotherOptimizer) {
  OptimizerSettings settings;
  settings.name = "rmsprop";
  EXPECT_EQ(ChooseOptimizer(settings).status().message(),
            "--optimizer: \"rmsprop\" is not sgd, momentum, adagrad or adam");
  settings.name = "sgd";
  settings.beta_1 = 2;  // adam's, refused although sgd does not use it
  EXPECT_EQ(ChooseOptimizer(settings).status().message(),
            "--beta_1: 2 must be in [0, 1)");
  settings.beta_1 = 0.9;
  settings.learning_rate = -0.1;
  EXPECT_EQ(ChooseOptimizer(settings).status().message(),
            "--learning_rate: -0.1 must be > 0");
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
