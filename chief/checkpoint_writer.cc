#include "chief/checkpoint_writer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {
namespace {

// The definition `name` (a variable, or "<variable>/<slot>") takes its shape
// from: the variable itself, or the longest variable name prefixing it.
const VariableDef* DefinitionOf(const std::string& name,
                                const TrainingConfig& config) {
  const VariableDef* best = nullptr;
  for (const VariableDef& def : config.variables()) {
    if (def.name() == name) return &def;
    if (name.size() > def.name().size() &&
        name.compare(0, def.name().size(), def.name()) == 0 &&
        name[def.name().size()] == '/' &&
        (best == nullptr || def.name().size() > best->name().size())) {
      best = &def;
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<CheckpointIndex> BuildCheckpointIndex(
    const CheckpointInfo& info, absl::Span<const SavedSlice> slices) {
  CheckpointIndex index;
  index.set_format_version(kCheckpointFormatVersion);
  index.set_run_id(info.run_id);
  index.set_step(info.step);
  index.set_epoch(static_cast<int32_t>(info.epoch));
  *index.mutable_config() = info.config;
  *index.mutable_placement() = info.placement;
  index.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));

  std::map<std::string, CheckpointVariable> by_name;
  for (const SavedSlice& s : slices) {
    const VariableDef* def = DefinitionOf(s.name(), info.config);
    if (def == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "saved slice '", s.name(), "' is of no variable of the run"));
    }
    auto [it, inserted] = by_name.try_emplace(s.name());
    CheckpointVariable& v = it->second;
    if (inserted) {
      v.set_name(s.name());
      v.set_dtype(def->dtype() == DT_INVALID ? DT_FLOAT : def->dtype());
      *v.mutable_shape() = def->shape();
      if (s.dtype() != DT_INVALID) {
        // A growing table's lifecycle data: [0, row_width] of its own type.
        v.set_dtype(s.dtype());
        v.mutable_shape()->clear_dims();
        v.mutable_shape()->add_dims(0);
        v.mutable_shape()->add_dims(s.row_width());
      }
      v.set_version(s.version());
    }
    v.set_version(std::min(v.version(), s.version()));
    CheckpointSlice* slice = v.add_slices();
    const bool growing =
        def->shape().dims_size() > 0 && def->shape().dims(0) == 0;
    if (!growing) *slice->mutable_rows() = s.rows();
    slice->set_num_rows(s.num_rows());
    slice->set_version(s.version());
    FileRegion* values = slice->mutable_values();
    values->set_file(s.file());
    values->set_offset(s.offset());
    values->set_length(s.length());
    values->set_crc32c(s.crc32c());
    if (growing) {
      FileRegion* ids = slice->mutable_ids();
      ids->set_file(s.file());
      ids->set_offset(s.ids_offset());
      ids->set_length(s.num_rows() * static_cast<int64_t>(sizeof(int64_t)));
      ids->set_crc32c(s.ids_crc32c());
    }
  }
  for (auto& [name, v] : by_name) {
    std::stable_sort(v.mutable_slices()->begin(), v.mutable_slices()->end(),
                     [](const CheckpointSlice& a, const CheckpointSlice& b) {
                       return a.rows().begin() < b.rows().begin();
                     });
    *index.add_variables() = std::move(v);
  }
  return index;
}

absl::Status WriteCheckpointIndex(const std::string& dir,
                                  const CheckpointIndex& index) {
  std::string bytes;
  if (!index.SerializeToString(&bytes)) {
    return absl::InternalError("cannot serialize the checkpoint index");
  }
  return WriteFileAtomically(absl::StrCat(dir, "/", kCheckpointIndexFile),
                             bytes);
}

absl::Status PruneCheckpoints(const std::string& model_dir, int keep) {
  namespace fs = std::filesystem;
  const std::vector<CheckpointRef> complete = ListCompleteCheckpoints(model_dir);
  if (complete.empty()) return absl::OkStatus();
  std::error_code error;
  for (size_t i = std::max(keep, 1); i < complete.size(); ++i) {
    fs::remove_all(complete[i].dir, error);
    if (error) {
      return ErrnoStatus(error.value(), absl::StrCat("remove ", complete[i].dir));
    }
  }
  // Leftovers of interrupted writes older than the newest checkpoint.
  const int64_t newest = complete.front().step;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(model_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || !entry.is_directory()) continue;
    size_t end = 5;
    while (end < name.size() && std::isdigit(name[end])) ++end;
    int64_t step = 0;
    // Not ours (or past int64): left alone.
    if (!absl::SimpleAtoi(name.substr(5, end - 5), &step)) continue;
    const bool leftover =
        end < name.size()
            ? name.compare(end, 5, ".tmp-") == 0 ||
                  name.compare(end, 5, ".old-") == 0
            : !fs::exists(entry.path() / kCheckpointIndexFile);
    if (leftover && step < newest) {
      std::error_code ignored;
      fs::remove_all(entry.path(), ignored);
    }
  }
  return absl::OkStatus();
}

}  // namespace chief
}  // namespace pstrain
