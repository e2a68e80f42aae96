#include "data/criteo_batch_source.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "data/criteo_feed.h"
#include "data/model_input.h"
#include "model/dynamic_embeddings.h"

namespace pstrain {
namespace worker {

absl::StatusOr<std::vector<CriteoInput>> CheckCriteoModel(
    const ModelSpec& spec) {
  const std::vector<InputColumns> columns = ModelInputColumns(spec);
  std::vector<CriteoInput> inputs;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    const std::string& name = spec.inputs[k].name;
    if (!data::IsCriteoInput(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_format=criteo: model input '", name,
          "' is not fed by Criteo data (inputs: \"dense\" [13], \"sparse\" "
          "[26], or one per field \"I1\"..\"I13\", \"C1\"..\"C26\")"));
    }
    const bool takes_ids = name == "sparse" || name[0] == 'C';
    const int64_t expected = name == "dense" ? 13 : name == "sparse" ? 26 : 1;
    if (columns[k].count != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_format=criteo: model input '", name, "' takes ",
          columns[k].count, " values; Criteo data gives it ", expected));
    }
    if (columns[k].ids != takes_ids) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_format=criteo: model input '", name, "' ",
          takes_ids ? "holds categorical ids but is not read by an Embedding"
                    : "holds numeric features but is read by an Embedding"));
    }
    inputs.push_back({name, columns[k].begin, columns[k].count, takes_ids});
  }
  for (const LayerSpec& layer : spec.layers) {
    if (layer.kind != LayerKind::kEmbedding || layer.variables.size() != 1) {
      continue;
    }
    for (const VariableDef& def : spec.variables) {
      if (def.name() == layer.variables[0] && !IsGrowingTable(def)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--data_format=criteo: Embedding '", layer.name,
            "' has a fixed input_dim, but Criteo ids are 64-bit: name it in "
            "--dynamic_embeddings (or give it input_dim 0)"));
      }
    }
  }
  return inputs;
}

absl::Status FillCriteoBatch(const data::CriteoBatch& in,
                             const std::vector<CriteoInput>& inputs,
                             int64_t row_elements, DataType dtype,
                             data::Batch* out) {
  const int64_t b = in.size();
  if (out->features.dtype() != dtype ||
      out->features.num_elements() != b * row_elements) {
    PSTRAIN_ASSIGN_OR_RETURN(out->features,
                             Tensor::Create(dtype, {b, row_elements}));
    PSTRAIN_ASSIGN_OR_RETURN(out->wide_ids,
                             Tensor::Create(DT_INT64, {b, row_elements}));
    PSTRAIN_ASSIGN_OR_RETURN(out->labels, Tensor::Create(DT_INT32, {b}));
  }
  std::memset(out->features.raw_data(), 0, b * row_elements * 4);
  std::memset(out->wide_ids.raw_data(), 0, b * row_elements * 8);
  for (const CriteoInput& input : inputs) {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor values,
                             data::CriteoInputTensor(in, input.name));
    if (values.num_elements() != b * input.count) {
      return absl::InternalError(absl::StrCat(
          "Criteo input '", input.name, "': ", values.num_elements(),
          " values for ", b, " rows of ", input.count));
    }
    for (int64_t r = 0; r < b; ++r) {
      const int64_t at = r * row_elements + input.begin;
      if (input.ids) {
        std::memcpy(out->wide_ids.data<int64_t>() + at,
                    values.data<int64_t>() + r * input.count,
                    input.count * sizeof(int64_t));
      } else if (dtype == DT_FLOAT) {
        std::memcpy(out->features.data<float>() + at,
                    values.data<float>() + r * input.count,
                    input.count * sizeof(float));
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "Criteo input '", input.name, "' is numeric in a row of ids"));
      }
    }
  }
  int32_t* labels = out->labels.data<int32_t>();
  for (int64_t r = 0; r < b; ++r) labels[r] = in.labels[r] > 0.5f ? 1 : 0;
  out->indices.assign(in.lines.begin(), in.lines.end());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CriteoBatchSource>> CriteoBatchSource::Open(
    CriteoSourceOptions options) {
  if (options.files.empty() || options.num_workers < 1 ||
      options.worker_index < 0 || options.worker_index >= options.num_workers ||
      options.batch_size < 1 || options.steps_per_epoch < 1 ||
      options.first_step < 0 || options.row_elements < 1 ||
      (options.dtype != DT_FLOAT && options.dtype != DT_INT32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Criteo batches: ", options.files.size(), " files, worker ",
        options.worker_index, " of ", options.num_workers, ", batch ",
        options.batch_size, ", ", options.steps_per_epoch,
        " steps per epoch from step ", options.first_step));
  }
  std::unique_ptr<CriteoBatchSource> source(
      new CriteoBatchSource(std::move(options)));
  PSTRAIN_RETURN_IF_ERROR(source->OpenEpoch());
  return source;
}

CriteoBatchSource::CriteoBatchSource(CriteoSourceOptions options)
    : options_(std::move(options)), step_(options_.first_step) {
  for (int i = 0; i < 2; ++i) {
    buffers_.push_back(std::make_unique<data::Batch>());
    free_.push_back(buffers_.back().get());
  }
}

int64_t CriteoBatchSource::EpochBadLines() const {
  return reader_ != nullptr ? reader_->bad_lines() : 0;
}

absl::Status CriteoBatchSource::OpenEpoch() {
  bad_lines_ += EpochBadLines();
  reader_.reset();
  data::CriteoReaderOptions options;
  options.num_workers = options_.num_workers;
  options.worker_index = options_.worker_index;
  options.batch_size = options_.batch_size;
  options.bad_lines = options_.bad_lines;
  options.start_line = (step_ % options_.steps_per_epoch) *
                       options_.num_workers * options_.batch_size;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<data::CriteoReader> reader,
                           data::CriteoReader::Open(options_.files, options));
  PSTRAIN_ASSIGN_OR_RETURN(reader_,
                           data::CriteoPrefetcher::Start(std::move(reader)));
  return absl::OkStatus();
}

absl::StatusOr<data::Batch*> CriteoBatchSource::Next() {
  if (options_.total_steps > 0 && step_ >= options_.total_steps) {
    return absl::OutOfRangeError("the run's last step was read");
  }
  if (free_.empty()) {
    return absl::FailedPreconditionError(
        "every Criteo batch buffer is held by the caller");
  }
  const int64_t in_epoch = step_ % options_.steps_per_epoch;
  if (in_epoch == 0 && step_ != options_.first_step) {
    if (options_.bad_lines == data::BadLines::kSkip) {
      LogInfo(absl::StrCat("worker ", options_.worker_index, ": epoch ",
                           step_ / options_.steps_per_epoch, ": skipped ",
                           EpochBadLines(), " malformed lines (", bad_lines(),
                           " so far)"));
    }
    PSTRAIN_RETURN_IF_ERROR(OpenEpoch());
  }
  PSTRAIN_ASSIGN_OR_RETURN(data::CriteoBatch * read, reader_->Next());
  data::Batch* batch = free_.back();
  data::CriteoBatch empty;
  absl::Status filled =
      FillCriteoBatch(read != nullptr ? *read : empty, options_.inputs,
                      options_.row_elements, options_.dtype, batch);
  reader_->Release(read);
  PSTRAIN_RETURN_IF_ERROR(filled);
  free_.pop_back();
  batch->epoch = step_ / options_.steps_per_epoch;
  batch->step = in_epoch;
  batch->end_of_epoch = in_epoch + 1 == options_.steps_per_epoch;
  ++step_;
  return batch;
}

void CriteoBatchSource::Release(data::Batch* batch) {
  if (batch != nullptr) free_.push_back(batch);
}

absl::StatusOr<CriteoSourceOptions> CriteoSourceOptionsFor(
    const ModelSpec& spec, std::vector<std::string> files, int num_workers,
    int64_t batch_size, data::BadLines bad_lines) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<CriteoInput> inputs,
                           CheckCriteoModel(spec));
  CriteoSourceOptions options;
  options.files = std::move(files);
  options.num_workers = num_workers;
  options.batch_size = batch_size;
  options.bad_lines = bad_lines;
  for (const CriteoInput& input : inputs) options.row_elements += input.count;
  options.inputs = std::move(inputs);
  options.dtype = ModelFeedDtype(spec);
  return options;
}

OpenCriteoStream CriteoStreamOpener(CriteoSourceOptions base) {
  return [base = std::move(base)](
             int64_t first_step, const data::RunLength& length,
             int worker) -> absl::StatusOr<std::unique_ptr<data::BatchSource>> {
    CriteoSourceOptions options = base;
    options.worker_index = worker;  // its own share or an absent one's
    options.first_step = first_step;
    options.steps_per_epoch = length.steps_per_epoch;
    options.total_steps = length.total_steps;
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CriteoBatchSource> source,
                             CriteoBatchSource::Open(std::move(options)));
    return std::unique_ptr<data::BatchSource>(std::move(source));
  };
}

}  // namespace worker
}  // namespace pstrain
