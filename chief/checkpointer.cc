#include "chief/checkpointer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chief/checkpoint_writer.h"
#include "common/atomic_file.h"
#include "common/process.h"
#include "common/retry.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {
namespace {

// FAILED_PRECONDITION unless the checkpoint holds the run's variables, with
// the same shapes: a model_dir of another model is not resumed.
absl::Status CheckSameVariables(const std::string& dir,
                                const CheckpointIndex& index,
                                const TrainingConfig& config) {
  std::map<std::string, std::string> saved, wanted;
  for (const VariableDef& def : index.config().variables()) {
    saved[def.name()] = def.shape().ShortDebugString();
  }
  for (const VariableDef& def : config.variables()) {
    wanted[def.name()] = def.shape().ShortDebugString();
  }
  if (saved == wanted) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint ", dir, " holds the variables of another model (",
      index.config().model_name(), ") than this run's (", config.model_name(),
      "); use another --model_dir"));
}

// fsync of a directory, so that a rename in it is durable.
absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", dir));
  const int result = fsync(fd);
  const int error = errno;
  close(fd);
  if (result != 0) return ErrnoStatus(error, absl::StrCat("fsync ", dir));
  return absl::OkStatus();
}

// The last component of `dir`: what a ps task is sent (it resolves it in
// its own --model_dir).
std::string Basename(const std::string& dir) {
  return std::filesystem::path(dir).filename().string();
}

}  // namespace

Checkpointer::Checkpointer(CheckpointerOptions options,
                           const TrainingConfig* config,
                           const Placement* placement, ps::PsClusterClient* ps)
    : options_(std::move(options)),
      config_(config),
      placement_(placement),
      ps_(ps) {}

absl::StatusOr<std::vector<SavedSlice>> Checkpointer::SavePsShards(
    const std::string& temp_dir, int64_t step) {
  namespace fs = std::filesystem;
  std::vector<SavedSlice> slices;
  std::error_code error;
  for (int task = 0; task < ps_->num_ps(); ++task) {
    absl::StatusOr<SaveResponse> saved;
    const absl::Time give_up = absl::Now() + options_.save_patience;
    while (true) {
      saved = ps_->client(task)->Save(Basename(temp_dir), step);
      // Sync: the step's last gradient may still be being applied.
      if (saved.ok() || !absl::IsFailedPrecondition(saved.status()) ||
          absl::Now() > give_up) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (!saved.ok()) {
      return absl::Status(saved.status().code(),
                          absl::StrCat("checkpoint at step ", step, ": ps ",
                                       task, ": ", saved.status().message()));
    }
    const std::string data = absl::StrCat(temp_dir, "/ps-", task, ".data");
    if (!fs::exists(data, error)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint at step ", step, ": ps ", task, " saved, but ", data,
          " is not there: give every ps task the chief's --model_dir (",
          options_.model_dir, ", on a filesystem they share)"));
    }
    slices.insert(slices.end(), saved->slices().begin(), saved->slices().end());
  }
  return slices;
}

absl::StatusOr<std::string> Checkpointer::Save(int64_t step, int64_t epoch) {
  namespace fs = std::filesystem;
  const absl::Time start = absl::Now();
  const std::string final_dir = CheckpointDir(options_.model_dir, step);
  const std::string temp_dir =
      absl::StrCat(final_dir, ".tmp-", absl::ToUnixMicros(start));
  PSTRAIN_RETURN_IF_ERROR(MakeDirectories(temp_dir));
  std::error_code error;
  absl::StatusOr<std::vector<SavedSlice>> slices =
      options_.save_slices != nullptr ? options_.save_slices(temp_dir, step)
                                      : SavePsShards(temp_dir, step);
  if (!slices.ok()) {
    fs::remove_all(temp_dir, error);
    return slices.status();
  }

  CheckpointInfo info;
  info.run_id = options_.run_id;
  info.step = step;
  info.epoch = epoch;
  info.config = *config_;
  info.placement = *placement_;
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointIndex index,
                           BuildCheckpointIndex(info, *slices));
  PSTRAIN_RETURN_IF_ERROR(WriteCheckpointIndex(temp_dir, index));

  // A checkpoint of the same step (a run resumed at its last step) is
  // replaced: moved aside, the new one renamed in, the old one deleted.
  std::string old_dir;
  if (fs::exists(final_dir, error)) {
    old_dir = absl::StrCat(final_dir, ".old-", absl::ToUnixMicros(start));
    fs::rename(final_dir, old_dir, error);
    if (error) {
      return ErrnoStatus(error.value(), absl::StrCat("rename ", final_dir));
    }
  }
  fs::rename(temp_dir, final_dir, error);
  if (error) {
    return ErrnoStatus(error.value(),
                       absl::StrCat("rename ", temp_dir, " to ", final_dir));
  }
  PSTRAIN_RETURN_IF_ERROR(SyncDirectory(options_.model_dir));
  if (!old_dir.empty()) fs::remove_all(old_dir, error);
  PSTRAIN_RETURN_IF_ERROR(PruneCheckpoints(options_.model_dir, options_.keep));
  LogInfo(absl::StrCat(options_.writer, ": checkpoint at step ", step, " in ",
                       final_dir, " (",
                       absl::FormatDuration(absl::Now() - start), ")"));
  return final_dir;
}

absl::StatusOr<std::string> Checkpointer::AwaitWorkerSave(
    int64_t step, absl::Duration patience) {
  const std::string dir = CheckpointDir(options_.model_dir, step);
  const absl::Time give_up = absl::Now() + patience;
  std::error_code error;
  while (!std::filesystem::exists(absl::StrCat(dir, "/", kCheckpointIndexFile),
                                  error)) {
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat(
          "checkpoint at step ", step, ": worker 0 did not write ", dir,
          " within ", absl::FormatDuration(patience),
          " (give it the chief's --model_dir, on a filesystem they share)"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  PSTRAIN_RETURN_IF_ERROR(PruneCheckpoints(options_.model_dir, options_.keep));
  return dir;
}

absl::StatusOr<LoadedCheckpoint> Checkpointer::RestoreLatest(
    int64_t generation) {
  const std::vector<CheckpointRef> complete =
      ListCompleteCheckpoints(options_.model_dir);
  if (complete.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no complete checkpoint in ", options_.model_dir));
  }
  absl::Status last;
  for (const CheckpointRef& ref : complete) {
    absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(ref.dir);
    absl::Status status = index.status();
    // The chief checks every CRC32C itself first, so that a damaged
    // checkpoint is skipped before any ps task changes.
    if (status.ok()) {
      PSTRAIN_RETURN_IF_ERROR(CheckSameVariables(ref.dir, *index, *config_));
      status = VerifyCheckpointData(ref.dir, *index);
    }
    if (status.ok()) {
      const std::vector<SavedSlice> slices = ToSavedSlices(*index);
      for (int task = 0; task < ps_->num_ps() && status.ok(); ++task) {
        const absl::Time give_up = absl::Now() + options_.peer_patience;
        for (int attempt = 1;; ++attempt) {
          status = ps_->client(task)->Restore(Basename(ref.dir), slices,
                                              index->step(), generation);
          if (!IsPeerFailure(status) || absl::Now() > give_up) break;
          absl::SleepFor(Backoff(RetryOptions(), attempt));
        }
        if (!status.ok()) {
          status = absl::Status(status.code(), absl::StrCat("ps ", task, ": ",
                                                            status.message()));
        }
        // Only a checkpoint proven bad is skipped: a ps task that stayed
        // unreachable says nothing about the data.
        if (IsPeerFailure(status)) return status;
      }
    }
    if (status.ok()) return LoadedCheckpoint{ref.dir, *std::move(index)};
    LogError(absl::StrCat("chief: checkpoint ", ref.dir, " is damaged (",
                          status.message(),
                          "); falling back to the previous one"));
    last = status;
  }
  return absl::DataLossError(absl::StrCat("no checkpoint of ",
                                          options_.model_dir,
                                          " restores; the oldest: ",
                                          last.message()));
}

}  // namespace chief
}  // namespace pstrain
