// Loss and accuracy of a model's weights on a test set: what the chief
// prints at each epoch's end and writes to summary.json, computed by the
// chief itself or by the evaluator task (chief/evaluator.h).
#ifndef PSTRAIN_CHIEF_EVALUATION_H_
#define PSTRAIN_CHIEF_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/backend.h"
#include "worker/data/dataset.h"

namespace pstrain {
namespace chief {

// Test-set loss and accuracy.
struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

// Evaluates `weights` (of version `version`) on every example of `test`, in
// batches of `batch` examples.
absl::StatusOr<Evaluation> EvaluateOnTestSet(worker::Backend* backend,
                                             const data::Dataset& test,
                                             const worker::Weights& weights,
                                             int64_t version, int64_t batch);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EVALUATION_H_
