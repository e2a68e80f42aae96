#include "chief/criteo_evaluation.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chief/ctr_metrics.h"
#include "common/status_macros.h"
#include "compute/id_remap.h"
#include "data/criteo_batch_source.h"
#include "data/model_input.h"
#include "model/dynamic_embeddings.h"

namespace pstrain {
namespace chief {
namespace {

// A growing table, the columns of the row holding its ids, and its mirror.
struct LocalTable {
  std::string name;
  int64_t begin = 0;
  int64_t count = 0;
  int64_t width = 0;
  std::unique_ptr<worker::IdRemap> remap;
  Tensor mirror;
};

}  // namespace

absl::StatusOr<Evaluation> EvaluateOnCriteoFiles(
    worker::Backend* backend, const worker::ModelSpec& spec,
    const worker::Weights& weights, int64_t version,
    const CriteoEvaluationOptions& options, bool binary_metrics,
    const PullRows& pull_rows) {
  if (options.batch < 1 || options.files.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluating on Criteo files: batch ", options.batch,
                     " of ", options.files.size(), " files"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<worker::CriteoInput> inputs,
                           worker::CheckCriteoModel(spec));
  int64_t row_elements = 0;
  for (const worker::CriteoInput& input : inputs) row_elements += input.count;
  const DataType dtype = worker::ModelFeedDtype(spec);

  const std::vector<worker::InputColumns> columns =
      worker::ModelInputColumns(spec);
  std::vector<LocalTable> tables;
  worker::Weights all = weights;
  for (const VariableDef& def : spec.variables) {
    if (!worker::IsGrowingTable(def)) continue;
    LocalTable table;
    table.name = def.name();
    table.width = def.shape().dims(1);
    for (const worker::LayerSpec& layer : spec.layers) {
      if (layer.kind == worker::LayerKind::kEmbedding &&
          layer.variables.size() == 1 && layer.variables[0] == def.name() &&
          layer.inputs[0].model_input) {
        table.begin = columns[layer.inputs[0].index].begin;
        table.count = columns[layer.inputs[0].index].count;
      }
    }
    const int64_t rows =
        worker::LocalTableRows(spec, def.name(), options.batch);
    table.remap = std::make_unique<worker::IdRemap>(rows);
    PSTRAIN_ASSIGN_OR_RETURN(table.mirror,
                             Tensor::Create(DT_FLOAT, {rows, table.width}));
    tables.push_back(std::move(table));
  }
  for (LocalTable& table : tables) all[table.name] = &table.mirror;

  data::CriteoReaderOptions reader_options;
  reader_options.batch_size = options.batch;
  reader_options.bad_lines = options.bad_lines;
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<data::CriteoReader> reader,
      data::CriteoReader::Open(options.files, reader_options));
  data::CriteoBatch read;
  data::Batch batch;
  std::vector<float> scores;
  std::vector<int32_t> labels;
  std::vector<float> probabilities(binary_metrics ? options.batch : 0);
  CtrMetrics ctr;
  double loss = 0;
  int64_t correct = 0;
  while (true) {
    PSTRAIN_ASSIGN_OR_RETURN(const bool more, reader->Next(&read));
    if (!more) break;
    PSTRAIN_RETURN_IF_ERROR(
        worker::FillCriteoBatch(read, inputs, row_elements, dtype, &batch));
    const int64_t size = batch.size();
    for (LocalTable& table : tables) {
      table.remap->Clear();
      for (int64_t r = 0; r < size; ++r) {
        for (int64_t c = table.begin; c < table.begin + table.count; ++c) {
          const int64_t i = r * row_elements + c;
          PSTRAIN_ASSIGN_OR_RETURN(const int64_t local,
                                   table.remap->Insert(worker::TableKey(
                                       batch.wide_ids.data<int64_t>()[i])));
          if (dtype == DT_INT32) {
            batch.features.data<int32_t>()[i] = static_cast<int32_t>(local);
          } else {
            batch.features.data<float>()[i] = static_cast<float>(local);
          }
        }
      }
      PSTRAIN_RETURN_IF_ERROR(pull_rows(table.name, table.remap->ids(),
                                        table.mirror.flat<float>().data()));
    }
    worker::StepInput input;
    input.features = batch.features.raw_data();
    input.labels = batch.labels.data<int32_t>();
    input.batch = size;
    input.weights_version = version;
    if (binary_metrics) {
      scores.resize(scores.size() + size);
      input.scores = scores.data() + scores.size() - size;
      input.probabilities = probabilities.data();
    }
    PSTRAIN_ASSIGN_OR_RETURN(worker::StepResult r,
                             backend->Evaluate(input, all));
    loss += r.loss_sum;
    correct += r.correct;
    labels.insert(labels.end(), input.labels, input.labels + size);
    if (binary_metrics) {
      ctr.Add(absl::MakeConstSpan(probabilities.data(), size),
              absl::MakeConstSpan(input.labels, size));
    }
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  Evaluation eval;
  eval.examples = n;
  eval.loss = n > 0 ? loss / n : 0;
  eval.accuracy = n > 0 ? static_cast<double>(correct) / n : 0;
  if (binary_metrics) {
    eval.auc = ExactAuc(scores, labels);
    SetCtrMetrics(ctr, &eval);
  }
  return eval;
}

}  // namespace chief
}  // namespace pstrain
