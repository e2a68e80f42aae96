// How the evaluator task (chief/evaluator.h) evaluates one checkpoint read
// whole: on the in-memory test set (EvaluateOnTestSet), or, for a run on
// Criteo files (--data_format=criteo), on the test files streamed
// (EvaluateOnCriteoFiles) with the growing tables' rows read from the
// checkpoint (chief/checkpoint_rows.h). Either gives the figures the
// chief's own evaluation gives for the same weights.
//
//   std::unique_ptr<CheckpointEvaluation> evaluation =
//       NewCriteoCheckpointEvaluation(backend, spec, criteo, true);
//   PSTRAIN_ASSIGN_OR_RETURN(Evaluation eval, evaluation->Evaluate(read));
#ifndef PSTRAIN_CHIEF_CHECKPOINT_EVALUATION_H_
#define PSTRAIN_CHIEF_CHECKPOINT_EVALUATION_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "chief/checkpoint_reader.h"
#include "chief/criteo_evaluation.h"
#include "chief/evaluation.h"
#include "compute/backend.h"
#include "data/dataset.h"
#include "model/model_spec.h"

namespace pstrain {
namespace chief {

class CheckpointEvaluation {
 public:
  virtual ~CheckpointEvaluation() = default;
  // Evaluates the weights of `checkpoint` (its step is the version); an
  // error names the variable or the data that failed.
  virtual absl::StatusOr<Evaluation> Evaluate(
      const ReadCheckpoint& checkpoint) = 0;
};

// On every example of `test` in batches of `batch`. The pointers must
// outlive the result.
std::unique_ptr<CheckpointEvaluation> NewTestSetCheckpointEvaluation(
    worker::Backend* backend, const data::Dataset* test, int64_t batch,
    bool binary_metrics);

// On the Criteo files of `options`: `spec` is the run's model
// (worker::LoadRunModel), `backend` computes
// worker::WithLocalTables(spec, options.batch) and must outlive the result.
std::unique_ptr<CheckpointEvaluation> NewCriteoCheckpointEvaluation(
    worker::Backend* backend, worker::ModelSpec spec,
    CriteoEvaluationOptions options, bool binary_metrics);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINT_EVALUATION_H_
