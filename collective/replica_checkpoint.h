// Checkpoints of a collective run, which has no ps tasks to hold them: the
// workers' replicas (collective/local_replica.h) are saved by worker 0 and
// restored by every worker, in the layout of a ps run's checkpoints
// (chief/checkpoint_layout.h): one data file, "worker-0.data", written by
// ps/dense_checkpoint.h as a ps shard writes its own, and the index the
// chief's Checkpointer builds. A collective run's checkpoint therefore
// restores in a ps run (as one ps task's, re-split by the placement) and
// exports with `chief --export_safetensors`, and a ps run's dense
// checkpoint restores in a collective one.
//
//   CheckpointerOptions options;  // model_dir, run_id, keep
//   options.save_slices = [&](const std::string& dir, int64_t) {
//     return SaveReplica(*replica, dir);
//   };
//   Checkpointer(options, &config, &placement, nullptr).Save(step, epoch);
//   ...
//   PSTRAIN_RETURN_IF_ERROR(
//       RestoreReplica(CheckpointDir(model_dir, step), replica.get()));
#ifndef PSTRAIN_COLLECTIVE_REPLICA_CHECKPOINT_H_
#define PSTRAIN_COLLECTIVE_REPLICA_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collective/local_replica.h"
#include "proto/ps_service.pb.h"

namespace pstrain {
namespace worker {

// The data file name a replica's checkpoint writes.
inline constexpr char kReplicaCheckpointFile[] = "worker-0.data";

// Writes every array of `replica` (values and optimizer slots) into
// <dir>/worker-0.data; returns their slices for the index.
absl::StatusOr<std::vector<SavedSlice>> SaveReplica(const LocalReplica& replica,
                                                    const std::string& dir);

// Writes the initial values of a replica of `variables` trained with
// `optimizer` (what every worker's LocalReplica::Create makes from the
// run's seed) into <dir>/worker-0.data: a collective run's checkpoint of
// step 0, which the chief writes before training. INVALID_ARGUMENT or
// UNIMPLEMENTED as LocalReplica::Create.
absl::StatusOr<std::vector<SavedSlice>> SaveInitialReplica(
    const std::vector<VariableDef>& variables, const OptimizerConfig& optimizer,
    const std::string& dir);

// Loads the complete checkpoint in `dir` into `replica`: every variable's
// value and optimizer slots, at the checkpoint's step. DATA_LOSS for a
// damaged checkpoint; FAILED_PRECONDITION naming an array the checkpoint
// lacks or whose size differs (another model or optimizer).
absl::Status RestoreReplica(const std::string& dir, LocalReplica* replica);

// RestoreReplica of model_dir's checkpoint of `step`, except that a
// model_dir without a checkpoint of step 0 (the chief writes one with the
// initial values) gives the replica its initial values again from the run's
// seed.
absl::Status RestoreReplicaAt(const std::string& model_dir, int64_t step,
                              LocalReplica* replica);

// Writes the replica's variables (values, no slots) to `path` as
// safetensors (chief/safetensors.h): what `chief --export_safetensors` writes
// of a checkpoint, from this worker's own copy (tests compare the replicas).
absl::Status ExportReplica(const LocalReplica& replica,
                           const std::string& path);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_REPLICA_CHECKPOINT_H_
