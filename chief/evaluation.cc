#include "chief/evaluation.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"

namespace pstrain {
namespace chief {

absl::StatusOr<Evaluation> EvaluateOnTestSet(worker::Backend* backend,
                                             const data::Dataset& test,
                                             const worker::Weights& weights,
                                             int64_t version, int64_t batch) {
  const int64_t n = test.size();
  const int64_t per_example = test.features.row_elements();
  // float32, or int32 ids for a model that starts with an Embedding.
  PSTRAIN_ASSIGN_OR_RETURN(
      Tensor features,
      Tensor::Create(data::FeedDtype(test), {batch, per_example}));
  std::vector<int64_t> indices;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int64_t size = std::min(batch, n - begin);
    indices.resize(size);
    for (int64_t i = 0; i < size; ++i) indices[i] = begin + i;
    data::GatherExamples(test, indices, features.raw_data());
    worker::StepInput input;
    input.features = features.raw_data();
    input.labels = test.labels.data() + begin;
    input.batch = size;
    input.weights_version = version;
    PSTRAIN_ASSIGN_OR_RETURN(worker::StepResult r,
                             backend->Evaluate(input, weights));
    loss += r.loss_sum;
    correct += r.correct;
  }
  Evaluation eval;
  eval.loss = n > 0 ? loss / n : 0;
  eval.accuracy = n > 0 ? static_cast<double>(correct) / n : 0;
  return eval;
}

}  // namespace chief
}  // namespace pstrain
