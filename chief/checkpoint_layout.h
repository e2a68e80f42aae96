// Where a checkpoint lives: model_dir/ckpt-<step>/, holding one data file
// per ps task and `index.pb` (a CheckpointIndex, proto/checkpoint.proto),
// written last and atomically. A directory without index.pb is incomplete and
// every reader ignores it. Shared by chief/checkpoint_reader.h and
// chief/checkpoint_writer.h.
#ifndef PSTRAIN_CHIEF_CHECKPOINT_LAYOUT_H_
#define PSTRAIN_CHIEF_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pstrain {
namespace chief {

// The index's format; readers refuse others.
inline constexpr int kCheckpointFormatVersion = 1;
// The index's file name in a checkpoint directory.
inline constexpr char kCheckpointIndexFile[] = "index.pb";

// "<model_dir>/ckpt-<step>".
std::string CheckpointDir(const std::string& model_dir, int64_t step);

// Whether `name` (a file name, no directory) is "ckpt-<digits>"; sets *step.
bool ParseCheckpointName(const std::string& name, int64_t* step);

// A checkpoint directory and its step.
struct CheckpointRef {
  int64_t step = 0;
  std::string dir;
};

// The complete checkpoints of `model_dir` (ckpt-<step> directories holding
// index.pb), newest first. Empty when there are none or no model_dir.
std::vector<CheckpointRef> ListCompleteCheckpoints(const std::string& model_dir);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINT_LAYOUT_H_
