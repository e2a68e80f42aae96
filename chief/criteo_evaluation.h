// Evaluating a run's weights on Criteo-format test files (--data_format=
// criteo; data/criteo_files.h's test*.tsv[.gz]), streamed: a batch at a
// time is read, and of each growing embedding table only the rows its ids
// name are fetched (through `pull_rows`, the ps in the chief), so neither
// the files nor the tables are ever held whole. The figures are those of
// EvaluateOnTestSet (chief/evaluation.h): loss, accuracy, exact AUC (over
// a score per example: 4 bytes each), log loss and calibration.
//
//   PSTRAIN_ASSIGN_OR_RETURN(Evaluation eval, EvaluateOnCriteoFiles(
//       backend, spec, weights, version, options, pull_rows));
#ifndef PSTRAIN_CHIEF_CRITEO_EVALUATION_H_
#define PSTRAIN_CHIEF_CRITEO_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chief/evaluation.h"
#include "compute/backend.h"
#include "data/criteo_reader.h"
#include "model/model_spec.h"

namespace pstrain {
namespace chief {

struct CriteoEvaluationOptions {
  std::vector<std::string> files;  // test*.tsv[.gz], in order.
  int64_t batch = 500;             // >= 1.
  data::BadLines bad_lines = data::BadLines::kRefuse;
};

// Writes the rows of `ids` (the ps's keys, compute/id_remap.h) of table
// `table`, in that order, to `out` ([ids.size(), width] floats).
using PullRows = std::function<absl::Status(
    const std::string& table, absl::Span<const int64_t> ids, float* out)>;

// Evaluates on every line of options.files. `spec` is the run's model (its
// growing tables of shape [0, width]); `backend` computes
// worker::WithLocalTables(spec, options.batch); `weights` holds every other
// variable (pulled at `version`). With `binary_metrics` (binary
// cross-entropy), AUC, log loss and calibration too. Errors: the reader's
// (naming file and line), CheckCriteoModel's, the backend's, pull_rows'.
absl::StatusOr<Evaluation> EvaluateOnCriteoFiles(
    worker::Backend* backend, const worker::ModelSpec& spec,
    const worker::Weights& weights, int64_t version,
    const CriteoEvaluationOptions& options, bool binary_metrics,
    const PullRows& pull_rows);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CRITEO_EVALUATION_H_
