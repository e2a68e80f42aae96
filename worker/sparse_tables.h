// The run's embedding tables (VariableDef.sparse, a Keras Embedding's
// "embedding/embeddings") as a worker trains them: per step it pulls only
// the rows its batch touches and pushes only those rows' gradients, to the
// ps tasks holding them (common/placement.h), every call to every ps task
// in flight at once, driven from the caller's thread (ps/sparse_call.h).
//
// The backend computes on a worker-local dense mirror of each table
// ([input_dim, output_dim], allocated once by the trainer): Pull writes the
// touched rows into it before the step; the rows no id of the step names
// are stale and unread. After the step, Push gathers the touched rows of the
// backend's full-size gradient (duplicate ids already summed by the
// backend's scatter).
//
//   tables->Clear();
//   PSTRAIN_RETURN_IF_ERROR(tables->Touch(ids, batch, examples));
//   PSTRAIN_RETURN_IF_ERROR(tables->Pull(sync ? step : 0, mirrors));
//   ... backend->TrainStep(input, weights, &gradients) ...
//   PSTRAIN_RETURN_IF_ERROR(tables->Push(step, examples, gradients));
//
// A growing table (shape[0] 0, model/dynamic_embeddings.h) has a
// mirror of LocalTableRows(spec, table, batch_rows) rows: TouchAndRemap
// numbers the step's distinct ids 0, 1, ... (compute/id_remap.h) and writes
// those local rows into the batch's id columns in place of the ids, so the
// backend computes on them; pull and push move the rows by their ids.
//
// Sync semantics match the dense variables': a pull waits for the step on
// every piece of every table (rows touched there or not), and every worker
// pushes to every piece each step (no rows where it touched none), so each
// piece's version is the step and the ps divides each row's summed gradient
// by the step's summed batch sizes. Async: only touched pieces are pulled
// and pushed, each push carrying the version that piece was pulled at (a
// too-stale push is the ps's FAILED_PRECONDITION, ps::IsStaleGradient).
// Retries, generations and request ids are PsClient's.
//
// Not thread-safe: one caller at a time. It may run while another thread
// pulls or pushes dense variables through the PsClusterClient, whose
// PsClients it shares (ps/ps_client.h says what they allow), as the
// trainer does.
#ifndef PSTRAIN_WORKER_SPARSE_TABLES_H_
#define PSTRAIN_WORKER_SPARSE_TABLES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "compute/backend.h"
#include "compute/id_remap.h"
#include "model/keras_model.h"
#include "proto/training.pb.h"
#include "ps/dense_call.h"
#include "ps/ps_client.h"

namespace pstrain {
namespace worker {

class SparseTables {
 public:
  // The sparse variables of `spec`, placed by `placement`, reached through
  // `ps` (which must outlive this). Each is an Embedding's table, fed the
  // ids of the model input it reads (model_input.h says where they lie in
  // an example's row); a sparse variable no Embedding reading a model input
  // holds is UNIMPLEMENTED; a table the placement lacks, or a growing one
  // (shape[0] 0) when `batch_rows` (the most examples a step's batches
  // hold together) is not positive, INVALID_ARGUMENT.
  static absl::StatusOr<std::unique_ptr<SparseTables>> Create(
      const ModelSpec& spec, const Placement& placement,
      ps::PsClusterClient* ps, bool sync, int64_t batch_rows = 0);

  bool empty() const { return tables_.empty(); }
  // Whether `name` is one of these tables (not pulled or pushed densely).
  bool Holds(const std::string& name) const;

  // Starts a step: forgets the ids touched so far.
  void Clear();

  // Adds the ids of a batch to the step's: `features` holds its examples'
  // rows ([batch, row], int32, or float32 whose id columns hold exact ids:
  // model_input.h), `examples[i]` names batch row i in errors (its dataset
  // index). INVALID_ARGUMENT naming the example and the id for an id
  // outside [0, input_dim); nothing is added then.
  // FAILED_PRECONDITION when a table is growing (use TouchAndRemap).
  absl::Status Touch(const Tensor& features,
                     absl::Span<const int64_t> examples);

  // As Touch, and for the growing tables: takes each id from `wide_ids`
  // (int64 [batch, row], the ids at the id columns) when not null, else
  // from `features`, and writes its local row into `features` in its place.
  // RESOURCE_EXHAUSTED when the step names more distinct ids than a mirror
  // holds; after an error, Clear before the next step.
  absl::Status TouchAndRemap(Tensor* features,
                             absl::Span<const int64_t> examples,
                             const Tensor* wide_ids = nullptr);

  // The rows of a table's mirror: input_dim, or a growing table's local
  // rows; 0 for a name that is not one of these tables.
  int64_t MirrorRows(const std::string& name) const;

  // Number of distinct ids touched in the step, over every table.
  int64_t num_touched() const;

  // Pulls the touched rows of every table into its mirror in `mirrors`
  // (float32 [input_dim, output_dim] by table name), after `min_version`.
  absl::Status Pull(int64_t min_version,
                    const std::map<std::string, Tensor*>& mirrors);

  // Pushes the touched rows of each table's full-size gradient in
  // `gradients`, sums over `batch_size` examples: sync as step `step`;
  // async each piece as of the version pulled. REQUIRES: Pull of this step
  // succeeded.
  absl::Status Push(int64_t step, int64_t batch_size,
                    const std::map<std::string, Tensor*>& gradients);

 private:
  struct Table {
    std::string name;
    // The columns of an example's row holding its ids.
    int64_t begin = 0;
    int64_t count = 0;
    int64_t rows = 0;   // input_dim, or a growing table's local rows.
    int64_t width = 0;  // output_dim
    VariablePlacement placement;
    // The ps tasks holding a piece, ascending.
    std::vector<int> tasks;
    // A growing table's local rows of the step's ids (TableKey'd); null
    // for a fixed one.
    std::unique_ptr<IdRemap> remap;
    // This step's distinct ids, and those each ps task holds (by task), in
    // first-seen order, with their rows in the mirror (pulled rows are
    // written there, pushed ones gathered from there, without looking the
    // ids up again).
    absl::flat_hash_set<int64_t> seen;
    std::map<int, std::vector<int64_t>> ids;
    std::map<int, std::vector<int64_t>> mirror_rows;
    // Async: the version each task's piece was pulled at.
    std::map<int, int64_t> versions;
  };

  SparseTables(ps::PsClusterClient* ps, bool sync, std::vector<Table> tables);

  // Touch and TouchAndRemap; `features` is written when not null.
  absl::Status TouchImpl(const Tensor& features, Tensor* writable,
                         absl::Span<const int64_t> examples,
                         const Tensor* wide_ids);
  // A table's pull or push to one ps task.
  struct Call {
    size_t table;
    int task;
  };
  // Runs calls[i] for every i, started by start(i, cq), all at once from
  // this thread; then again(i), one by one, for each whose status(i) is
  // UNAVAILABLE (a ps restarting, a link down for a moment: PsClient's
  // retries).
  void RunEveryCall(const std::vector<Call>& calls,
                    const std::function<std::unique_ptr<ps::DenseCall>(
                        size_t, grpc::CompletionQueue*)>& start,
                    const std::function<void(size_t)>& again,
                    const std::function<absl::Status(size_t)>& status);

  ps::PsClusterClient* const ps_;
  const bool sync_;
  std::vector<Table> tables_;
  // A push's rows, gathered from the gradient (reused).
  std::vector<float> rows_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_SPARSE_TABLES_H_
