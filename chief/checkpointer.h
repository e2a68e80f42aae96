// The chief's checkpoints of a run: saving the ps tasks' state at a step,
// and restoring it when a run resumes.
//
// Save(step) has every ps task write its shard into a fresh directory
// model_dir/ckpt-<step>.tmp-<time>, builds the index from the slices they
// report, writes index.pb last, renames the directory to ckpt-<step> and
// deletes all but the newest `keep` checkpoints. The caller makes sure no
// worker trains meanwhile (RunState::SetPauseAtStep), so in sync mode every
// variable is at `step`.
//
// RestoreLatest() restores the newest good checkpoint onto the ps tasks
// (whose variables must have been created), falling back to older ones when
// the newest is proven damaged (its files fail their checks, here or on a
// ps), with a log line saying why. A ps task that cannot be reached is
// waited for: that says nothing about the checkpoint.
//
// The ps tasks are sent the checkpoint's directory name, not its path: each
// reads and writes inside its own --model_dir, which must be the chief's
// (a shared filesystem). Save checks that every ps task's file is there.
//
// Not thread-safe: the driver calls it from its one thread.
#ifndef PSTRAIN_CHIEF_CHECKPOINTER_H_
#define PSTRAIN_CHIEF_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/checkpoint_reader.h"
#include "proto/checkpoint.pb.h"
#include "ps/ps_client.h"

namespace pstrain {
namespace chief {

struct CheckpointerOptions {
  std::string model_dir;
  std::string run_id;
  // Complete checkpoints kept, >= 1.
  int keep = 5;
  // How long a sync Save may keep finding a variable short of the step (the
  // last gradient of the step still being applied) before giving up.
  absl::Duration save_patience = absl::Seconds(10);
  // How long a restore keeps retrying a ps task that cannot be reached (or
  // is recovering) before the restore fails.
  absl::Duration peer_patience = absl::Minutes(5);
  // Writes the data files of the checkpoint of `step` into `dir` and
  // returns their slices. Unset: the ps tasks do (their Save). A collective
  // run's worker 0, which holds every variable, sets it and writes the
  // checkpoints itself (collective/replica_checkpoint.h), in the same layout.
  std::function<absl::StatusOr<std::vector<SavedSlice>>(const std::string& dir,
                                                        int64_t step)>
      save_slices;
  // Who writes, in log lines.
  std::string writer = "chief";
};

class Checkpointer {
 public:
  // The pointers must outlive the Checkpointer; `ps` may be null when
  // options.save_slices is set and RestoreLatest is not called.
  Checkpointer(CheckpointerOptions options, const TrainingConfig* config,
               const Placement* placement, ps::PsClusterClient* ps);

  // Writes the checkpoint of `step` (in `epoch`); returns its directory.
  absl::StatusOr<std::string> Save(int64_t step, int64_t epoch);

  // Restores the newest good checkpoint, the ps tasks serving recovery
  // generation `generation` from then on; returns it. NOT_FOUND when the
  // model_dir has no complete checkpoint; DATA_LOSS when none restores; a
  // ps task's own error when it stays unreachable for peer_patience.
  absl::StatusOr<LoadedCheckpoint> RestoreLatest(int64_t generation);

  // Collective runs, whose worker 0 writes the checkpoints (options'
  // save_slices, in its own Checkpointer): waits until the checkpoint of
  // `step` is complete in model_dir, then keeps the newest `keep`; returns
  // its directory. DEADLINE_EXCEEDED after `patience`.
  absl::StatusOr<std::string> AwaitWorkerSave(int64_t step,
                                              absl::Duration patience);

 private:
  // The ps tasks' Save of `step` into `temp_dir`.
  absl::StatusOr<std::vector<SavedSlice>> SavePsShards(
      const std::string& temp_dir, int64_t step);

  const CheckpointerOptions options_;
  const TrainingConfig* const config_;
  const Placement* const placement_;
  ps::PsClusterClient* const ps_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINTER_H_
