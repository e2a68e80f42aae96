#include "chief/checkpoint_evaluation.h"

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_rows.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/dynamic_embeddings.h"

namespace pstrain {
namespace chief {
namespace {

// The variables of `checkpoint` as weights, each in a tensor of `storage`,
// but those named in `skip`.
absl::StatusOr<worker::Weights> CheckpointWeights(
    const ReadCheckpoint& checkpoint, const std::set<std::string>& skip,
    std::vector<Tensor>* storage) {
  storage->clear();
  storage->reserve(checkpoint.variables.size());
  worker::Weights weights;
  for (const WholeVariable& v : checkpoint.variables) {
    if (skip.count(v.name) > 0) continue;
    PSTRAIN_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(v.dtype, v.shape));
    if (t.num_bytes() != v.data.size()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint of step ", checkpoint.index.step(),
                       ": variable '", v.name, "' holds ", v.data.size(),
                       " bytes, expected ", t.num_bytes()));
    }
    std::memcpy(t.raw_data(), v.data.data(), v.data.size());
    storage->push_back(std::move(t));
    weights[v.name] = &storage->back();
  }
  return weights;
}

class TestSetCheckpointEvaluation : public CheckpointEvaluation {
 public:
  TestSetCheckpointEvaluation(worker::Backend* backend,
                              const data::Dataset* test, int64_t batch,
                              bool binary_metrics)
      : backend_(backend),
        test_(test),
        batch_(batch),
        binary_metrics_(binary_metrics) {}

  absl::StatusOr<Evaluation> Evaluate(
      const ReadCheckpoint& checkpoint) override {
    std::vector<Tensor> storage;
    PSTRAIN_ASSIGN_OR_RETURN(worker::Weights weights,
                             CheckpointWeights(checkpoint, {}, &storage));
    return EvaluateOnTestSet(backend_, *test_, weights, checkpoint.index.step(),
                             batch_, binary_metrics_);
  }

 private:
  worker::Backend* const backend_;
  const data::Dataset* const test_;
  const int64_t batch_;
  const bool binary_metrics_;
};

class CriteoCheckpointEvaluation : public CheckpointEvaluation {
 public:
  CriteoCheckpointEvaluation(worker::Backend* backend, worker::ModelSpec spec,
                             CriteoEvaluationOptions options,
                             bool binary_metrics)
      : backend_(backend),
        spec_(std::move(spec)),
        options_(std::move(options)),
        binary_metrics_(binary_metrics) {}

  absl::StatusOr<Evaluation> Evaluate(
      const ReadCheckpoint& checkpoint) override {
    // Growing tables are read row by row, as a batch names them.
    std::set<std::string> growing;
    for (const VariableDef& def : checkpoint.index.config().variables()) {
      if (!worker::IsGrowingTable(def)) continue;
      growing.insert(def.name());
      growing.insert(def.name() + "/ids");
    }
    std::vector<Tensor> storage;
    PSTRAIN_ASSIGN_OR_RETURN(worker::Weights weights,
                             CheckpointWeights(checkpoint, growing, &storage));
    PSTRAIN_ASSIGN_OR_RETURN(CheckpointRows rows,
                             CheckpointRows::Create(checkpoint));
    return EvaluateOnCriteoFiles(
        backend_, spec_, weights, checkpoint.index.step(), options_,
        binary_metrics_,
        [&rows](const std::string& table, absl::Span<const int64_t> ids,
                float* out) { return rows.Pull(table, ids, out); });
  }

 private:
  worker::Backend* const backend_;
  const worker::ModelSpec spec_;
  const CriteoEvaluationOptions options_;
  const bool binary_metrics_;
};

}  // namespace

std::unique_ptr<CheckpointEvaluation> NewTestSetCheckpointEvaluation(
    worker::Backend* backend, const data::Dataset* test, int64_t batch,
    bool binary_metrics) {
  return std::make_unique<TestSetCheckpointEvaluation>(backend, test, batch,
                                                       binary_metrics);
}

std::unique_ptr<CheckpointEvaluation> NewCriteoCheckpointEvaluation(
    worker::Backend* backend, worker::ModelSpec spec,
    CriteoEvaluationOptions options, bool binary_metrics) {
  return std::make_unique<CriteoCheckpointEvaluation>(
      backend, std::move(spec), std::move(options), binary_metrics);
}

}  // namespace chief
}  // namespace pstrain
