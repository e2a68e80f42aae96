// The evaluator task: TensorFlow's sidecar evaluator. Started as the chief
// binary with a TF_CONFIG task of type "evaluator" (the chief's TF_CONFIG
// lists it, so the chief leaves evaluation to it), it registers with the
// chief, then evaluates on the test set every checkpoint of model_dir
// written at an epoch's end (the chief writes one there for it), oldest
// first, as `evaluation` says (chief/checkpoint_evaluation.h: the in-memory
// test set, or Criteo test files streamed), and reports each to the chief
// (ReportMetrics with evaluation set; for binary cross-entropy, the AUC too).
// It stops once the run is over and the final checkpoint is evaluated.
//
// model_dir must be the chief's (a shared volume on a cluster).
#ifndef PSTRAIN_CHIEF_EVALUATOR_H_
#define PSTRAIN_CHIEF_EVALUATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chief/checkpoint_evaluation.h"
#include "chief/chief_client.h"

namespace pstrain {
namespace chief {

struct EvaluatorOptions {
  std::string model_dir;
  // How often model_dir is looked at.
  absl::Duration poll = absl::Milliseconds(200);
  // How long to keep trying a chief that does not answer.
  absl::Duration chief_patience = absl::Minutes(5);
};

class Evaluator {
 public:
  // The pointers must outlive the Evaluator. `chief` has registered; `run`
  // is its RegisterResponse.
  Evaluator(EvaluatorOptions options, const RegisterResponse* run,
            ChiefClient* chief, CheckpointEvaluation* evaluation);

  // Evaluates until the run is over; an error names the checkpoint or the
  // call that failed.
  absl::Status Run();

 private:
  // Evaluates the epoch-end checkpoints newer than last_step_.
  absl::Status EvaluateNewCheckpoints();

  const EvaluatorOptions options_;
  const RegisterResponse* const run_;
  ChiefClient* const chief_;
  CheckpointEvaluation* const evaluation_;
  int64_t total_steps_ = 0;
  int64_t last_step_ = 0;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EVALUATOR_H_
