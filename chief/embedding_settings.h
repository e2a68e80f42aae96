// The chief's settings for embedding tables, from its --embedding_* and
// --ftrl_* flags: the optimizer that updates embedding rows (separate from
// the dense --optimizer) and the lifecycle of growing tables (admission,
// TTL, LFU cap). They are written into the run's VariableDefs
// (VariableDef.optimizer, VariableDef.lifecycle), so they reach the ps tasks
// with CreateVariables and are saved in every checkpoint's TrainingConfig.
//
//   EmbeddingSettings settings = ...;  // from flags, in main.cc
//   PSTRAIN_RETURN_IF_ERROR(CheckEmbeddingSettings(settings));
//   PSTRAIN_RETURN_IF_ERROR(
//       ApplyEmbeddingSettings(settings, dense_optimizer, &spec.variables));
#ifndef PSTRAIN_CHIEF_EMBEDDING_SETTINGS_H_
#define PSTRAIN_CHIEF_EMBEDDING_SETTINGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace chief {

struct EmbeddingSettings {
  // --embedding_optimizer: sgd, momentum, adagrad (TensorFlow's: epsilon
  // outside the root), adam, ftrl or lazy_adam; "" applies the dense
  // optimizer to embedding tables too.
  std::string optimizer;
  // --embedding_learning_rate; 0: the dense optimizer's learning rate.
  double learning_rate = 0;
  // --embedding_initial_accumulator_value (adagrad, ftrl).
  double initial_accumulator_value = 0.1;
  // --embedding_epsilon (adagrad, adam, lazy_adam).
  double epsilon = 1e-7;
  // --embedding_beta_1, --embedding_beta_2 (adam, lazy_adam).
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  // --momentum and --nesterov (momentum; shared with the dense optimizer).
  double momentum = 0.9;
  bool nesterov = false;
  // --ftrl_learning_rate_power, --ftrl_l1_regularization_strength,
  // --ftrl_l2_regularization_strength,
  // --ftrl_l2_shrinkage_regularization_strength, --ftrl_beta.
  double ftrl_learning_rate_power = -0.5;
  double ftrl_l1 = 0;
  double ftrl_l2 = 0;
  double ftrl_l2_shrinkage = 0;
  double ftrl_beta = 0;
  // --embedding_min_count (>= 1), --embedding_ttl_steps (>= 0; 0 never),
  // --embedding_max_rows (>= 0; 0 no cap): see VariableDef.Lifecycle.
  int64_t min_count = 1;
  int64_t ttl_steps = 0;
  int64_t max_rows = 0;
};

// OK if every setting is in range, for every embedding optimizer (a bad
// value is refused whether or not the run uses it, as the dense flags are),
// else INVALID_ARGUMENT naming the flag ("--ftrl_beta: -1 must be >= 0").
absl::Status CheckEmbeddingSettings(const EmbeddingSettings& settings);

// The optimizer for embedding rows: nullopt when settings.optimizer is ""
// (the dense one applies), else its config with the learning rate of
// `dense` unless settings.learning_rate is set. Errors as
// CheckEmbeddingSettings.
absl::StatusOr<std::optional<OptimizerConfig>> EmbeddingOptimizer(
    const EmbeddingSettings& settings, const OptimizerConfig& dense);

// Sets VariableDef.optimizer of every sparse variable (when
// settings.optimizer is set) and VariableDef.lifecycle of every growing
// table (shape[0] 0; when min_count > 1, ttl_steps > 0 or max_rows > 0).
absl::Status ApplyEmbeddingSettings(const EmbeddingSettings& settings,
                                    const OptimizerConfig& dense,
                                    std::vector<VariableDef>* variables);

// One line for the chief's start, "" without embedding tables: each
// table's optimizer, lifecycle and bytes per row on a ps, e.g.
// "embedding tables: emb (growing, 16 wide, ftrl, min_count 3, max_rows
// 100000; 169 bytes per row)".
std::string DescribeEmbeddings(const std::vector<VariableDef>& variables,
                               const OptimizerConfig& dense);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EMBEDDING_SETTINGS_H_
