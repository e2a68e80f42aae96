// Reading checkpoints (see chief/checkpoint_writer.h for the layout): finding
// the complete ones, reading and checking an index, verifying the data files
// against it, and assembling row slices into whole variables.
//
//   PSTRAIN_ASSIGN_OR_RETURN(LoadedCheckpoint ckpt,
//                            FindLatestGoodCheckpoint(model_dir, &LogInfo));
//   PSTRAIN_ASSIGN_OR_RETURN(std::vector<WholeVariable> vars,
//                            ReadVariables(ckpt.dir, ckpt.index, false));
#ifndef PSTRAIN_CHIEF_CHECKPOINT_READER_H_
#define PSTRAIN_CHIEF_CHECKPOINT_READER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chief/checkpoint_layout.h"
#include "proto/checkpoint.pb.h"
#include "proto/ps_service.pb.h"

namespace pstrain {
namespace chief {

// Reads <dir>/index.pb. DATA_LOSS if it does not parse, FAILED_PRECONDITION
// for a format version other than kCheckpointFormatVersion.
absl::StatusOr<CheckpointIndex> ReadCheckpointIndex(const std::string& dir);

// Reads every region the index names and checks its CRC32C: DATA_LOSS naming
// the file and variable on a mismatch or a short file.
absl::Status VerifyCheckpointData(const std::string& dir,
                                  const CheckpointIndex& index);

// The index's slices as the ps tasks' Restore takes them.
std::vector<SavedSlice> ToSavedSlices(const CheckpointIndex& index);

// A whole variable (or slot), row-major little-endian bytes.
struct WholeVariable {
  std::string name;
  DataType dtype = DT_FLOAT;
  std::vector<int64_t> shape;
  std::string data;
};

// The variables of the checkpoint, assembled from their row slices, each
// slice's CRC32C verified; the optimizer slots too when `with_slots`.
// Variables are in the order of index.config.variables. An embedding table
// that grows on first touch comes as its stored rows in id order
// ([rows, width]) followed by "<name>/ids" (int64 [rows]).
absl::StatusOr<std::vector<WholeVariable>> ReadVariables(
    const std::string& dir, const CheckpointIndex& index, bool with_slots);

// A checkpoint read whole: its index and variables (without slots).
struct ReadCheckpoint {
  CheckpointIndex index;
  std::vector<WholeVariable> variables;
};

// The checkpoint in `dir` (ReadCheckpointIndex, then ReadVariables without
// slots), or nullopt if `dir` is gone when the read fails: the chief keeps
// only its newest checkpoints, so one listed a moment ago may be pruned
// while it is read, which is no damage. Other errors are returned.
absl::StatusOr<std::optional<ReadCheckpoint>> ReadCheckpointUnlessPruned(
    const std::string& dir);

// A checkpoint found good: its directory and index.
struct LoadedCheckpoint {
  std::string dir;
  CheckpointIndex index;
};

// The newest complete checkpoint whose index reads and whose data verifies;
// for each newer one skipped, `log` gets a line saying why. NOT_FOUND when
// there is no complete checkpoint; DATA_LOSS when every one is damaged.
absl::StatusOr<LoadedCheckpoint> FindLatestGoodCheckpoint(
    const std::string& model_dir,
    const std::function<void(absl::string_view)>& log);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINT_READER_H_
