// A worker's training batches streamed from Criteo-format files
// (--data_format=criteo; data/criteo_reader.h), in the rows the model is fed:
// each model input is filled by its name (data/criteo_feed.h: "dense",
// "sparse", "I1".."I13", "C1".."C26"), in the model's row order
// (data/model_input.h). The 64-bit ids go to Batch::wide_ids; the id
// columns of `features` hold 0 until worker/sparse_tables.h writes each id's
// local row there, so every table an id input feeds must be growing
// (CheckCriteoModel).
//
// Sharding and epochs: the reader's (worker w of W takes the global lines
// g with (g / B) mod W == w, its block of B of each step's global batch, in
// file order, unshuffled). An epoch is
// steps_per_epoch batches (ComputeRunLength over the training files'
// lines, the remainder dropped); each epoch opens the files again. A run
// resumed at step s starts epoch s / steps_per_epoch at line
// (s mod steps_per_epoch) * W * B, which is where an uninterrupted run
// would be when no line was skipped. Under BadLines::kSkip a worker whose
// lines run out before the epoch's last step (it skipped some) trains
// empty batches to the epoch's end; the skipped lines are counted and
// logged at each epoch's end.
//
// Not thread-safe (one trainer); the reading runs ahead in a thread of its
// own (data/criteo_prefetcher.h).
#ifndef PSTRAIN_DATA_CRITEO_BATCH_SOURCE_H_
#define PSTRAIN_DATA_CRITEO_BATCH_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/batch_source.h"
#include "data/criteo_prefetcher.h"
#include "data/criteo_reader.h"
#include "data/run_length.h"
#include "model/model_spec.h"

namespace pstrain {
namespace worker {

// Where one model input lies in a row, and whether it takes ids.
struct CriteoInput {
  std::string name;
  int64_t begin = 0;
  int64_t count = 0;
  bool ids = false;
};

// The model's inputs as a Criteo batch feeds them. INVALID_ARGUMENT naming
// the input when one is not a Criteo input, has another number of values
// than the format gives it, takes ids from a fixed-vocabulary table (a
// Criteo id is 64 bits: --dynamic_embeddings or input_dim 0) or is "dense"
// or "I<j>" read by an Embedding.
absl::StatusOr<std::vector<CriteoInput>> CheckCriteoModel(
    const ModelSpec& spec);

// Writes the rows of `in` into `out` (resized to in.size() rows of
// `row_elements`): features in `dtype` (DT_FLOAT, or DT_INT32 for a model
// of ids only), the ids into out->wide_ids, int32 labels, the lines as
// indices.
absl::Status FillCriteoBatch(const data::CriteoBatch& in,
                             const std::vector<CriteoInput>& inputs,
                             int64_t row_elements, DataType dtype,
                             data::Batch* out);

struct CriteoSourceOptions {
  std::vector<std::string> files;  // train*.tsv[.gz], in order.
  int num_workers = 1;
  int worker_index = 0;
  int64_t batch_size = 1;
  int64_t steps_per_epoch = 1;
  int64_t first_step = 0;
  int64_t total_steps = 0;
  data::BadLines bad_lines = data::BadLines::kRefuse;
  std::vector<CriteoInput> inputs;
  int64_t row_elements = 0;
  DataType dtype = DT_FLOAT;
};

class CriteoBatchSource : public data::BatchSource {
 public:
  // INVALID_ARGUMENT for options out of range; the reader's errors.
  static absl::StatusOr<std::unique_ptr<CriteoBatchSource>> Open(
      CriteoSourceOptions options);

  absl::StatusOr<data::Batch*> Next() override;
  void Release(data::Batch* batch) override;

  // Malformed lines skipped so far (BadLines::kSkip), over the epochs.
  int64_t bad_lines() const { return bad_lines_ + EpochBadLines(); }

 private:
  explicit CriteoBatchSource(CriteoSourceOptions options);
  // Opens the files for the epoch of step_, at its line.
  absl::Status OpenEpoch();
  int64_t EpochBadLines() const;

  const CriteoSourceOptions options_;
  int64_t step_ = 0;
  std::unique_ptr<data::CriteoPrefetcher> reader_;
  int64_t bad_lines_ = 0;  // Of the epochs before the current one.
  std::vector<std::unique_ptr<data::Batch>> buffers_;
  std::vector<data::Batch*> free_;
};

// The options of a run's Criteo sources for `spec` (CheckCriteoModel's
// errors): every field but the worker's index and the run's steps.
absl::StatusOr<CriteoSourceOptions> CriteoSourceOptionsFor(
    const ModelSpec& spec, std::vector<std::string> files, int num_workers,
    int64_t batch_size, data::BadLines bad_lines);

// What a worker's trainer opens a share of the files with
// (TrainerOptions::open_stream): `worker`'s lines from `first_step` on, in a
// run of `length`, with the rest of `base`.
using OpenCriteoStream =
    std::function<absl::StatusOr<std::unique_ptr<data::BatchSource>>(
        int64_t first_step, const data::RunLength& length, int worker)>;
OpenCriteoStream CriteoStreamOpener(CriteoSourceOptions base);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_BATCH_SOURCE_H_
