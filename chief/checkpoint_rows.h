// The rows of a checkpoint's growing embedding tables, looked up by id: what
// the evaluator task reads in place of the ps's read-only pull when it
// evaluates a checkpoint on Criteo files (chief/checkpoint_evaluation.h).
// An id the checkpoint holds reads as stored; one it does not hold reads as
// the ps's read-only pull gives it (ps::EmbeddingTable::FillAbsentRow: the
// initializer's row, or zeros under admission). So the rows are those the
// chief's own evaluation reads from the ps at the step of the checkpoint.
//
//   PSTRAIN_ASSIGN_OR_RETURN(CheckpointRows rows,
//                            CheckpointRows::Create(checkpoint));
//   PSTRAIN_RETURN_IF_ERROR(rows.Pull("emb/embeddings", ids, out));
#ifndef PSTRAIN_CHIEF_CHECKPOINT_ROWS_H_
#define PSTRAIN_CHIEF_CHECKPOINT_ROWS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chief/checkpoint_reader.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace chief {

class CheckpointRows {
 public:
  // Indexes the growing tables of `checkpoint` (as ReadVariables gives
  // them: "<name>" [rows, width] in id order, "<name>/ids" int64 [rows]);
  // their definitions come from checkpoint.index.config(). `checkpoint`
  // must outlive the result. DATA_LOSS naming the table when its rows and
  // ids are missing or disagree.
  static absl::StatusOr<CheckpointRows> Create(
      const ReadCheckpoint& checkpoint);

  // Writes the rows of `ids` of `table`, in that order, to `out`
  // ([ids.size(), width] floats): criteo_evaluation.h's PullRows.
  // NOT_FOUND when `table` is not a growing table of the checkpoint.
  absl::Status Pull(const std::string& table, absl::Span<const int64_t> ids,
                    float* out) const;

  // Rows stored for `table` (0 for an unknown table).
  int64_t num_rows(const std::string& table) const;

 private:
  struct Table {
    VariableDef def;
    int64_t width = 0;
    const char* rows = nullptr;  // [rows, width] floats, little-endian.
    absl::flat_hash_map<int64_t, int64_t> index;  // id -> row
  };
  std::map<std::string, Table> tables_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINT_ROWS_H_
