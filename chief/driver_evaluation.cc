// Driver's evaluations (driver.h): of the variables on the ps tasks at the
// end of each epoch and of the run, or of the newest checkpoint where the
// variables are in the workers (collective runs), on the test set or the
// Criteo test files.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_reader.h"
#include "chief/driver.h"
#include "common/process.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {

absl::StatusOr<Evaluation> Driver::FinalEvaluation() {
  if (options_.evaluator_task) {
    const int64_t total = state_->total_steps();
    std::optional<RunState::EvaluationReport> report = state_->WaitForEvaluation(
        total, absl::Now() + options_.evaluator_patience);
    PrintEvaluatorReports();
    if (report.has_value()) {
      return Evaluation{report->loss, report->accuracy, report->auc};
    }
    LogError(absl::StrCat("chief: the evaluator did not evaluate step ", total,
                          " within ",
                          absl::FormatDuration(options_.evaluator_patience),
                          "; evaluating it here"));
  }
  return Evaluate();
}

absl::StatusOr<Evaluation> Driver::EvaluateCheckpoint(
    const std::string& dir, const CheckpointIndex& index) {
  if (last_checkpoint_evaluation_.has_value() &&
      last_checkpoint_evaluation_->first == dir) {
    return last_checkpoint_evaluation_->second;
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<WholeVariable> variables,
                           ReadVariables(dir, index, /*with_slots=*/false));
  std::vector<Tensor> storage;
  storage.reserve(variables.size());
  worker::Weights weights;
  for (const WholeVariable& variable : variables) {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t,
                             Tensor::Create(DT_FLOAT, variable.shape));
    if (variable.dtype != DT_FLOAT || t.num_bytes() != variable.data.size()) {
      return absl::DataLossError(absl::StrCat("evaluating ", dir, ": '",
                                              variable.name,
                                              "' is not float32 of its shape"));
    }
    std::memcpy(t.raw_data(), variable.data.data(), variable.data.size());
    storage.push_back(std::move(t));
    weights[variable.name] = &storage.back();
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      Evaluation evaluation,
      EvaluateOnTestSet(
          evaluator_, *test_, weights, index.step(), options_.eval_batch,
          config_->loss().kind() == LossConfig::BINARY_CROSSENTROPY));
  last_checkpoint_evaluation_.emplace(dir, evaluation);
  return evaluation;
}

absl::StatusOr<Evaluation> Driver::EvaluateLatestCheckpoint() {
  PSTRAIN_ASSIGN_OR_RETURN(
      LoadedCheckpoint latest,
      FindLatestGoodCheckpoint(options_.model_dir, [](absl::string_view line) {
        LogError(absl::StrCat("chief: ", line));
      }));
  return EvaluateCheckpoint(latest.dir, latest.index);
}

absl::StatusOr<Evaluation> Driver::EvaluateCollectiveStep(int64_t step) {
  const std::string dir = CheckpointDir(options_.model_dir, step);
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointIndex index, ReadCheckpointIndex(dir));
  return EvaluateCheckpoint(dir, index);
}

absl::StatusOr<Evaluation> Driver::Evaluate() {
  if (options_.collective) return EvaluateLatestCheckpoint();
  std::vector<Tensor> storage;
  storage.reserve(spec_->variables.size());
  std::map<std::string, Tensor*> pull;
  std::map<std::string, Tensor*> tables;  // Embedding tables: every row.
  worker::Weights weights;
  for (const VariableDef& def : spec_->variables) {
    const std::vector<int64_t> shape(def.shape().dims().begin(),
                                     def.shape().dims().end());
    const bool streamed = !options_.criteo_test_files.empty();
    if (def.sparse() && !shape.empty() && shape[0] == 0 && streamed) {
      continue;  // Growing: its rows are pulled batch by batch.
    }
    if (def.sparse() && (shape.empty() || shape[0] <= 0)) {
      return absl::UnimplementedError(absl::StrCat(
          "evaluating: embedding table '", def.name(),
          "' grows on first touch; only fixed-vocabulary tables are pulled"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(DT_FLOAT, shape));
    storage.push_back(std::move(t));
    (def.sparse() ? tables : pull)[def.name()] = &storage.back();
    weights[def.name()] = &storage.back();
  }
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t version, ps_->PullDense(0, pull));
  for (const auto& [name, table] : tables) {
    // In pieces of about 4 MB: a reply is one message, and gRPC refuses
    // messages over 64 MB.
    const int64_t rows = table->shape()[0];
    const int64_t width = std::max<int64_t>(1, table->row_elements());
    const int64_t per_pull =
        std::max<int64_t>(1, (int64_t{4} << 20) / (width * sizeof(float)));
    std::vector<int64_t> ids;
    for (int64_t begin = 0; begin < rows; begin += per_pull) {
      ids.clear();
      for (int64_t id = begin; id < std::min(rows, begin + per_pull); ++id) {
        ids.push_back(id);
      }
      PSTRAIN_RETURN_IF_ERROR(ps_->PeekSparse(
          name, ids, table->flat<float>().data() + begin * width));
    }
  }
  const bool binary = config_->loss().kind() == LossConfig::BINARY_CROSSENTROPY;
  if (!options_.criteo_test_files.empty()) {
    CriteoEvaluationOptions criteo;
    criteo.files = options_.criteo_test_files;
    criteo.batch = options_.eval_batch;
    criteo.bad_lines = options_.skip_bad_lines ? data::BadLines::kSkip
                                               : data::BadLines::kRefuse;
    return EvaluateOnCriteoFiles(
        evaluator_, *spec_, weights, version, criteo, binary,
        [this](const std::string& table, absl::Span<const int64_t> ids,
               float* out) { return ps_->PeekSparse(table, ids, out); });
  }
  return EvaluateOnTestSet(evaluator_, *test_, weights, version,
                           options_.eval_batch, binary);
}

}  // namespace chief
}  // namespace pstrain
