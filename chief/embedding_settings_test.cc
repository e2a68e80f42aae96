#include "chief/embedding_settings.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace chief {
namespace {

OptimizerConfig DenseAdam() {
  OptimizerConfig config;
  config.mutable_adam()->set_beta_1(0.9f);
  config.mutable_adam()->set_beta_2(0.999f);
  config.set_learning_rate(0.001);
  return config;
}

VariableDef Def(const std::string& name, std::vector<int64_t> dims,
                bool sparse) {
  VariableDef def;
  def.set_name(name);
  def.set_sparse(sparse);
  for (int64_t d : dims) def.mutable_shape()->add_dims(d);
  return def;
}

std::vector<VariableDef> Model() {
  return {Def("dense/kernel", {4, 2}, false), Def("fixed", {100, 8}, true),
          Def("grow", {0, 16}, true)};
}

TEST(EmbeddingSettings, DefaultsChangeNothing) {
  std::vector<VariableDef> variables = Model();
  ASSERT_TRUE(
      ApplyEmbeddingSettings(EmbeddingSettings(), DenseAdam(), &variables)
          .ok());
  for (const VariableDef& def : variables) {
    EXPECT_FALSE(def.has_optimizer()) << def.name();
    EXPECT_FALSE(def.has_lifecycle()) << def.name();
  }
}

TEST(EmbeddingSettings, SetsTheOptimizerOfSparseVariablesAndLifecycleOfGrowing) {
  EmbeddingSettings settings;
  settings.optimizer = "ftrl";
  settings.ftrl_l1 = 0.5;
  settings.min_count = 3;
  settings.max_rows = 1000;
  std::vector<VariableDef> variables = Model();
  ASSERT_TRUE(ApplyEmbeddingSettings(settings, DenseAdam(), &variables).ok());
  EXPECT_FALSE(variables[0].has_optimizer());
  for (const VariableDef* def : {&variables[1], &variables[2]}) {
    ASSERT_TRUE(def->optimizer().has_ftrl()) << def->name();
    EXPECT_FLOAT_EQ(def->optimizer().ftrl().l1_regularization_strength(), 0.5);
    EXPECT_FLOAT_EQ(def->optimizer().ftrl().learning_rate_power(), -0.5);
    // The dense optimizer's rate, --embedding_learning_rate unset.
    EXPECT_DOUBLE_EQ(def->optimizer().learning_rate(), 0.001);
  }
  EXPECT_FALSE(variables[1].has_lifecycle());  // fixed vocabulary
  EXPECT_EQ(variables[2].lifecycle().min_count(), 3);
  EXPECT_EQ(variables[2].lifecycle().ttl_steps(), 0);
  EXPECT_EQ(variables[2].lifecycle().max_rows(), 1000);
  const std::string line = DescribeEmbeddings(variables, DenseAdam());
  // ftrl: value, accumulator and linear (3 * 16 * 4) plus 41 bytes.
  EXPECT_NE(line.find("grow (growing, 16 wide, ftrl lr 0.001, min_count 3, "
                      "ttl_steps 0, max_rows 1000; 233 bytes per row on a ps)"),
            std::string::npos)
      << line;
}

TEST(EmbeddingSettings, AdagradIsTensorFlowsAndTakesItsOwnRate) {
  EmbeddingSettings settings;
  settings.optimizer = "adagrad";
  settings.learning_rate = 0.05;
  absl::StatusOr<std::optional<OptimizerConfig>> config =
      EmbeddingOptimizer(settings, DenseAdam());
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->has_value());
  EXPECT_TRUE((*config)->adagrad().epsilon_outside_sqrt());
  EXPECT_FLOAT_EQ((*config)->adagrad().initial_accumulator_value(), 0.1f);
  EXPECT_DOUBLE_EQ((*config)->learning_rate(), 0.05);
}

TEST(EmbeddingSettings, RefusesBadValuesNamingTheFlag) {
  struct Case {
    void (*set)(EmbeddingSettings*);
    std::string message;
  };
  const Case cases[] = {
      {[](EmbeddingSettings* s) { s->optimizer = "rmsprop"; },
       "--embedding_optimizer: \"rmsprop\" is not sgd, momentum, adagrad, "
       "adam, ftrl, lazy_adam (or empty: --optimizer)"},
      {[](EmbeddingSettings* s) { s->min_count = 0; },
       "--embedding_min_count: 0 must be >= 1"},
      {[](EmbeddingSettings* s) { s->ttl_steps = -2; },
       "--embedding_ttl_steps: -2 must be >= 0"},
      {[](EmbeddingSettings* s) { s->max_rows = -1; },
       "--embedding_max_rows: -1 must be >= 0"},
      {[](EmbeddingSettings* s) { s->learning_rate = 0.1; },
       "--embedding_learning_rate: applies with --embedding_optimizer only"},
      {[](EmbeddingSettings* s) {
         s->optimizer = "sgd";
         s->learning_rate = -1;
       },
       "--embedding_learning_rate: -1 must be > 0"},
      {[](EmbeddingSettings* s) { s->ftrl_learning_rate_power = 0.5; },
       "--ftrl_learning_rate_power: 0.5 must be <= 0"},
      {[](EmbeddingSettings* s) { s->ftrl_l2_shrinkage = -1; },
       "--ftrl_l2_shrinkage_regularization_strength: -1 must be >= 0"},
      {[](EmbeddingSettings* s) { s->ftrl_beta = -1; },
       "--ftrl_beta: -1 must be >= 0"},
      {[](EmbeddingSettings* s) { s->beta_1 = 1; },
       "--embedding_beta_1: 1 must be in [0, 1)"},
      {[](EmbeddingSettings* s) { s->initial_accumulator_value = -1; },
       "--embedding_initial_accumulator_value: -1 must be >= 0"},
  };
  for (const Case& c : cases) {
    EmbeddingSettings settings;
    c.set(&settings);
    absl::Status status = CheckEmbeddingSettings(settings);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(status.message(), c.message);
    std::vector<VariableDef> variables = Model();
    EXPECT_FALSE(ApplyEmbeddingSettings(settings, DenseAdam(), &variables).ok());
  }
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
