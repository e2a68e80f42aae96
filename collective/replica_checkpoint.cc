#include "collective/replica_checkpoint.h"

#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_layout.h"
#include "chief/checkpoint_reader.h"
#include "chief/safetensors.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "ps/dense_checkpoint.h"

namespace pstrain {
namespace worker {

absl::StatusOr<std::vector<SavedSlice>> SaveReplica(const LocalReplica& replica,
                                                    const std::string& dir) {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<AtomicFile> out,
      AtomicFile::Create(absl::StrCat(dir, "/", kReplicaCheckpointFile)));
  google::protobuf::RepeatedPtrField<SavedSlice> slices;
  PSTRAIN_RETURN_IF_ERROR(ps::AppendDenseArrays(
      replica.variables(), kReplicaCheckpointFile, out.get(), &slices));
  PSTRAIN_RETURN_IF_ERROR(out->Commit());
  return std::vector<SavedSlice>(slices.begin(), slices.end());
}

absl::StatusOr<std::vector<SavedSlice>> SaveInitialReplica(
    const std::vector<VariableDef>& variables, const OptimizerConfig& optimizer,
    const std::string& dir) {
  LocalReplicaOptions options;
  options.variables = variables;
  options.optimizer = optimizer;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LocalReplica> replica,
                           LocalReplica::Create(std::move(options)));
  return SaveReplica(*replica, dir);
}

absl::Status RestoreReplica(const std::string& dir, LocalReplica* replica) {
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointIndex index,
                           chief::ReadCheckpointIndex(dir));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<chief::WholeVariable> arrays,
      chief::ReadVariables(dir, index, /*with_slots=*/true));
  std::map<std::string, std::string*> by_name;
  for (chief::WholeVariable& array : arrays) {
    by_name[array.name] = &array.data;
  }
  for (const auto& [name, variable] : replica->variables()) {
    std::vector<std::string> values(variable->num_arrays());
    for (int a = 0; a < variable->num_arrays(); ++a) {
      const std::string array = variable->ArrayName(a);
      auto it = by_name.find(array);
      if (it == by_name.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("checkpoint ", dir, " has no '", array,
                         "' (another model or optimizer?)"));
      }
      if (static_cast<int64_t>(it->second->size()) != variable->num_bytes()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint ", dir, ": '", array, "' has ", it->second->size(),
            " bytes; this run's variable has ", variable->num_bytes()));
      }
      values[a] = std::move(*it->second);
    }
    variable->Restore(values, index.step());
  }
  return absl::OkStatus();
}

absl::Status ExportReplica(const LocalReplica& replica,
                           const std::string& path) {
  std::vector<chief::WholeVariable> variables;
  for (const auto& [name, variable] : replica.variables()) {
    chief::WholeVariable whole;
    whole.name = name;
    whole.shape.assign(variable->def().shape().dims().begin(),
                       variable->def().shape().dims().end());
    variable->ReadArrays([&whole](int array, const char* data, int64_t size) {
      if (array == 0) whole.data.assign(data, size);
    });
    variables.push_back(std::move(whole));
  }
  return chief::WriteSafetensors(path, variables);
}

absl::Status RestoreReplicaAt(const std::string& model_dir, int64_t step,
                              LocalReplica* replica) {
  const std::string dir = chief::CheckpointDir(model_dir, step);
  std::error_code error;
  if (step == 0 &&
      !std::filesystem::exists(
          absl::StrCat(dir, "/", chief::kCheckpointIndexFile), error)) {
    return replica->Reinitialize();
  }
  return RestoreReplica(dir, replica);
}

}  // namespace worker
}  // namespace pstrain
