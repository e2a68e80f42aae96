// Growing embedding tables: an Embedding whose table has no fixed
// vocabulary. Its rows are keyed by any 64-bit id (a Criteo id,
// data/criteo_hash.h), held on the ps task the id hashes to and created on
// first touch (ps/embedding_table.h). A table is growing when its layer has
// input_dim 0 in the model's JSON, or is named in the chief's
// --dynamic_embeddings (TrainingConfig.dynamic_embeddings); its VariableDef
// then has shape [0, output_dim].
//
// A backend computes an Embedding on a dense table indexed by small ids, so
// a worker trains a growing table on a local mirror of a few rows: the
// batch's distinct ids are numbered 0, 1, ... (compute/id_remap.h), and the
// backend is built from WithLocalTables(spec, rows), where each growing
// table has as many rows as a batch of `rows` examples can name ids.
//
//   PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec, LoadRunModel(config));
//   ModelSpec local = WithLocalTables(spec, config.batch_size_per_worker());
//   ... CreateCpuBackend(local, options) ...
#ifndef PSTRAIN_MODEL_DYNAMIC_EMBEDDINGS_H_
#define PSTRAIN_MODEL_DYNAMIC_EMBEDDINGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/model_spec.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

// Whether `def` is a growing table: sparse, shape [0, width].
bool IsGrowingTable(const VariableDef& def);

// Makes the tables of the Embedding layers named in `layers` growing.
// INVALID_ARGUMENT naming the flag and the layer when a name is not an
// Embedding layer of `spec`.
absl::Status MakeEmbeddingsDynamic(absl::Span<const std::string> layers,
                                   ModelSpec* spec);

// The run's model as every task reads it: config.model_json() parsed with
// the run seed, config.dynamic_embeddings() made growing.
absl::StatusOr<ModelSpec> LoadRunModel(const TrainingConfig& config);

// The ids per example the Embedding holding `table` reads (the product of
// its input's shape); 0 when no Embedding holds it.
int64_t IdsPerExample(const ModelSpec& spec, const std::string& table);

// The rows of a growing table's local mirror for batches of up to
// `batch_rows` examples: the most distinct ids they can name.
int64_t LocalTableRows(const ModelSpec& spec, const std::string& table,
                       int64_t batch_rows);

// `spec` with each growing table (and its Embedding's input_dim) given
// LocalTableRows(spec, table, batch_rows) rows: what a backend computes on.
ModelSpec WithLocalTables(const ModelSpec& spec, int64_t batch_rows);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_DYNAMIC_EMBEDDINGS_H_
