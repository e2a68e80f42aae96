// The chief binary run as TF_CONFIG's "evaluator" task: it registers with
// the run's chief, reads the test set of --data_dir and evaluates each
// epoch-end checkpoint of --model_dir (chief/evaluator.h) until the run
// ends. Also the CPU backend that evaluates a run, the chief's or the
// evaluator's.
//
//   EvaluatorTaskOptions options = ...;  // from flags, in main.cc
//   absl::Status status = RunEvaluatorTask(tf_config, security, options);
//   // INVALID_ARGUMENT: a bad TF_CONFIG, data or model (exit 2)
#ifndef PSTRAIN_CHIEF_EVALUATOR_TASK_H_
#define PSTRAIN_CHIEF_EVALUATOR_TASK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grpc_security.h"
#include "common/tf_config.h"
#include "compute/backend.h"
#include "model/model_spec.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace chief {

struct EvaluatorTaskOptions {
  // The chief's --data_dir (its test set is read) and --model_dir (its
  // checkpoints are evaluated).
  std::string data_dir;
  std::string model_dir;
  // How long to wait for the chief, at registration and later.
  absl::Duration patience = absl::Minutes(5);
  // Evaluation threads; 0: one per core.
  int threads = 0;
  // Examples per evaluation batch.
  int64_t eval_batch = 500;
};

// Runs the evaluator task until the run ends: OK then; INVALID_ARGUMENT for
// a TF_CONFIG without a chief, or data or a model that cannot be evaluated;
// the chief's or the evaluation's error otherwise.
absl::Status RunEvaluatorTask(const TfConfig& tf_config,
                              const GrpcSecurity& security,
                              const EvaluatorTaskOptions& options);

// The CPU backend that evaluates a run of `config` with `threads` threads
// (0: one per core), computing the run's loss.
absl::StatusOr<std::unique_ptr<worker::Backend>> CreateEvaluationBackend(
    const worker::ModelSpec& spec, const TrainingConfig& config, int threads);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EVALUATOR_TASK_H_
