// Writing a checkpoint's index, and keeping the newest checkpoints.
//
// Layout: chief/checkpoint_layout.h. The ps tasks' Save writes the data
// files; the chief writes the index last, atomically.
//
//   PSTRAIN_ASSIGN_OR_RETURN(CheckpointIndex index,
//                            BuildCheckpointIndex(info, slices));
//   PSTRAIN_RETURN_IF_ERROR(WriteCheckpointIndex(dir, index));
//   PSTRAIN_RETURN_IF_ERROR(PruneCheckpoints(model_dir, /*keep=*/5));
#ifndef PSTRAIN_CHIEF_CHECKPOINT_WRITER_H_
#define PSTRAIN_CHIEF_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chief/checkpoint_layout.h"
#include "proto/checkpoint.pb.h"
#include "proto/ps_service.pb.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace chief {

// What the index says besides the slices.
struct CheckpointInfo {
  std::string run_id;
  int64_t step = 0;
  int64_t epoch = 0;
  TrainingConfig config;
  Placement placement;
};

// The index of the slices every ps task saved: one entry per variable or
// optimizer slot ("<variable>/<slot>", shaped like its variable), in name
// order, its slices in row order. INVALID_ARGUMENT for a slice of no
// variable of info.config.
absl::StatusOr<CheckpointIndex> BuildCheckpointIndex(
    const CheckpointInfo& info, absl::Span<const SavedSlice> slices);

// Writes `index` as <dir>/index.pb: temporary file, fsync, rename.
absl::Status WriteCheckpointIndex(const std::string& dir,
                                  const CheckpointIndex& index);

// Deletes all but the newest `keep` complete checkpoints of `model_dir`, and
// the incomplete checkpoint directories older than the newest complete one.
// REQUIRES: keep >= 1.
absl::Status PruneCheckpoints(const std::string& model_dir, int keep);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINT_WRITER_H_
