#include "worker/local_replica.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {

absl::StatusOr<std::unique_ptr<LocalReplica>> LocalReplica::Create(
    LocalReplicaOptions options) {
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a collective run needs at least one worker, not ",
                     options.num_workers));
  }
  if (options.num_workers > 1 && options.ring == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.num_workers, " workers need a ring to all-reduce in"));
  }
  std::unique_ptr<LocalReplica> replica(new LocalReplica());
  replica->ring_ = options.ring;
  replica->num_workers_ = options.num_workers;
  PSTRAIN_ASSIGN_OR_RETURN(replica->optimizer_,
                           ps::CreateOptimizer(options.optimizer));
  for (const VariableDef& def : options.variables) {
    if (def.sparse()) {
      return absl::UnimplementedError(absl::StrCat(
          "variable '", def.name(),
          "' is an embedding table, which a collective run (no ps) does not "
          "hold; add a \"ps\" job to TF_CONFIG to train this model"));
    }
    const ps::Optimizer* optimizer = replica->optimizer_.get();
    if (def.has_moving_average()) {
      absl::StatusOr<std::unique_ptr<ps::Optimizer>> average =
          ps::CreateMovingAverage(def.moving_average().momentum());
      if (!average.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable '", def.name(), "': ", average.status().message()));
      }
      optimizer = average->get();
      replica->moving_averages_.push_back(*std::move(average));
    }
    const int64_t rows = def.shape().dims_size() > 0 ? def.shape().dims(0) : 1;
    PSTRAIN_ASSIGN_OR_RETURN(
        std::unique_ptr<ps::DenseVariable> variable,
        ps::DenseVariable::Create(def, 0, rows, optimizer));
    replica->optimizers_[def.name()] = optimizer;
    if (!replica->variables_.emplace(def.name(), std::move(variable)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", def.name(), "' defined twice"));
    }
  }
  return replica;
}

absl::Status LocalReplica::Reinitialize() {
  for (auto& [name, variable] : variables_) {
    const VariableDef& def = variable->def();
    PSTRAIN_ASSIGN_OR_RETURN(
        std::unique_ptr<ps::DenseVariable> fresh,
        ps::DenseVariable::Create(def, 0, variable->row_end(),
                                  optimizers_.at(name)));
    variable = std::move(fresh);
  }
  return absl::OkStatus();
}

int64_t LocalReplica::version() const {
  int64_t version = 0;
  bool first = true;
  for (const auto& [name, v] : variables_) {
    version = first ? v->version() : std::min(version, v->version());
    first = false;
  }
  return version;
}

absl::Status LocalReplica::PushDense(
    int64_t version, int64_t batch_size,
    const std::map<std::string, Tensor*>& gradients) {
  spans_.clear();
  for (const auto& [name, gradient] : gradients) {
    auto it = variables_.find(name);
    if (it == variables_.end()) {
      return absl::FailedPreconditionError(absl::StrCat("pushing variable '",
                                                        name,
                                                        "', which this replica "
                                                        "does not hold"));
    }
    if (static_cast<int64_t>(gradient->num_bytes()) !=
        it->second->num_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient of '", name, "' has ", gradient->num_bytes(),
                       " bytes, the variable ", it->second->num_bytes()));
    }
    spans_.push_back(gradient->flat<float>());
  }
  if (ring_ != nullptr && num_workers_ > 1) {
    // Ids strictly increase within a generation (steps) and across them
    // (a restore starts a new generation, at an earlier step maybe).
    const uint64_t id = (static_cast<uint64_t>(generation_) << 32) |
                        static_cast<uint64_t>(step_ + 1);
    PSTRAIN_RETURN_IF_ERROR(ring_->AllReduce(id, absl::MakeConstSpan(spans_)));
  }
  const int64_t global_batch = batch_size * num_workers_;
  for (const auto& [name, gradient] : gradients) {
    ps::Chunk chunk;
    chunk.data = absl::string_view(
        static_cast<const char*>(gradient->raw_data()), gradient->num_bytes());
    variables_.at(name)->ApplyAsync(global_batch,
                                    absl::MakeConstSpan(&chunk, 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LocalReplica::PullDense(
    int64_t min_version, const std::map<std::string, Tensor*>& values) {
  int64_t lowest = -1;
  for (const auto& [name, value] : values) {
    auto it = variables_.find(name);
    if (it == variables_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pulling variable '", name, "', which this replica does not hold"));
    }
    const ps::DenseVariable& variable = *it->second;
    if (static_cast<int64_t>(value->num_bytes()) != variable.num_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pulling '", name, "' into ", value->num_bytes(),
                       " bytes; the variable has ", variable.num_bytes()));
    }
    if (variable.version() < min_version) {
      return absl::FailedPreconditionError(
          absl::StrCat("variable '", name, "' is at version ",
                       variable.version(), ", below ", min_version));
    }
    char* out = static_cast<char*>(value->raw_data());
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t version,
                             variable.Read(min_version, absl::Now(), 1,
                                           [out](const ps::ValueView& view) {
                                             std::memcpy(out, view.data,
                                                         view.size);
                                           }));
    lowest = lowest < 0 ? version : std::min(lowest, version);
  }
  return std::max<int64_t>(lowest, 0);
}

}  // namespace worker
}  // namespace pstrain
