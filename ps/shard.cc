#include "ps/shard.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "common/update_config.h"
#include "ps/variable_error.h"

namespace pstrain {
namespace ps {
namespace {

// The rows of `variable` placed on `ps_task`: true and [*begin, *end) if
// there is a piece there, false if none. INVALID_ARGUMENT for a placement
// that does not fit the definition.
absl::StatusOr<bool> PieceOnTask(const ShardVariable& variable, int ps_task,
                                 int64_t* begin, int64_t* end) {
  const VariableDef& def = variable.def();
  const VariablePlacement& placement = variable.placement();
  if (placement.name() != def.name()) {
    return VariableError(def.name(), absl::StrCat("placement is for '",
                                                  placement.name(), "'"));
  }
  if (placement.partitioning() != VariablePlacement::WHOLE &&
      placement.partitioning() != VariablePlacement::ROW_RANGES) {
    return VariableError(def.name(),
                         "a dense variable needs WHOLE or ROW_RANGES placement");
  }
  const int64_t rows = def.shape().dims_size() == 0 ? 1 : def.shape().dims(0);
  bool found = false;
  for (const VariablePlacement::Slice& slice : placement.slices()) {
    if (slice.row_begin() < 0 || slice.row_begin() > slice.row_end() ||
        slice.row_end() > rows) {
      return VariableError(def.name(), absl::StrCat(
          "placement rows [", slice.row_begin(), ", ", slice.row_end(),
          ") do not fit its ", rows, " rows"));
    }
    if (slice.ps_task() != ps_task) continue;
    if (found) {
      return VariableError(def.name(), absl::StrCat(
          "placement puts two slices on ps ", ps_task));
    }
    found = true;
    *begin = slice.row_begin();
    *end = slice.row_end();
  }
  return found;
}

// RESOURCE_EXHAUSTED, naming the variable that crosses it, if the pieces
// `request` places on `ps_task` (`arrays` arrays each: value and optimizer
// slots) would hold more than `max_bytes` (sizes past int64 included);
// INVALID_ARGUMENT for a negative dimension or row range. Checked before
// anything is allocated: the sizes come from the network.
absl::Status CheckShardBytes(
    const CreateVariablesRequest& request, int ps_task,
    const std::function<int(const VariableDef&)>& arrays, int64_t max_bytes) {
  int64_t total = 0;
  for (const ShardVariable& variable : request.variables()) {
    const VariableDef& def = variable.def();
    // Bytes of one row (of a scalar, the whole).
    int64_t row_bytes = static_cast<int64_t>(sizeof(float)) * arrays(def);
    for (int d = 1; d < def.shape().dims_size(); ++d) {
      const int64_t dim = def.shape().dims(d);
      if (dim < 0) {
        return VariableError(
            def.name(),
            absl::StrCat("shape ", ShapeString(ShapeDims(def.shape())),
                         " has a negative dimension"));
      }
      // Past max_bytes (or int64), it is refused below if any row is here.
      row_bytes = dim > 0 && row_bytes > max_bytes / dim
                      ? std::numeric_limits<int64_t>::max()
                      : row_bytes * dim;
    }
    int64_t rows = 0;
    for (const VariablePlacement::Slice& slice :
         variable.placement().slices()) {
      if (slice.ps_task() != ps_task) continue;
      if (slice.row_begin() < 0 || slice.row_end() < slice.row_begin()) {
        return VariableError(
            def.name(),
            absl::StrCat("placement rows [", slice.row_begin(), ", ",
                         slice.row_end(), ") are not a range"));
      }
      if (def.shape().dims_size() == 0) {
        rows = 1;
      } else if (variable.placement().partitioning() !=
                 VariablePlacement::ROW_HASH) {
        rows = slice.row_end() - slice.row_begin();
      }
    }
    if (row_bytes > 0 && rows > (max_bytes - total) / row_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "variable '", def.name(), "': the variables placed on ps ", ps_task,
          " would hold more than its limit of ", max_bytes,
          " bytes (values and optimizer slots; the ps's --max_shard_bytes)"));
    }
    total += rows * row_bytes;
  }
  return absl::OkStatus();
}

}  // namespace

Shard::Shard(ShardOptions options) : options_(std::move(options)) {}

absl::StatusOr<const Shard::Run*> Shard::CheckRun(
    const RequestHeader& header) const {
  absl::MutexLock lock(&mu_);
  if (run_ == nullptr) {
    // UNAVAILABLE: a ps that just (re)started is not ready yet; clients
    // retry, and the chief creates and restores its variables.
    return absl::UnavailableError(absl::StrCat(
        "ps ", options_.ps_task,
        " has no variables yet (the chief has not created them)"));
  }
  if (header.run_id() != run_->run_id) {
    // Neither run id is quoted: the ps's is what a caller must know to
    // take part in the run.
    return absl::FailedPreconditionError(absl::StrCat(
        "the request's run id is not the run of ps ", options_.ps_task));
  }
  return run_.get();
}

absl::StatusOr<EmbeddingTable*> Shard::FindTable(
    const Run& run, const std::string& name) const {
  auto it = run.tables.find(name);
  if (it == run.tables.end()) {
    return VariableError(
        name,
        absl::StrCat("not an embedding table held by ps ", options_.ps_task));
  }
  return it->second.get();
}

absl::Status Shard::CreateVariables(const CreateVariablesRequest& request,
                                    CreateVariablesResponse* response) {
  const std::string& run_id = request.header().run_id();
  if (run_id.empty()) {
    return absl::InvalidArgumentError("header.run_id: empty");
  }
  if (request.ps_task() != options_.ps_task) {
    return absl::FailedPreconditionError(
        absl::StrCat("request for ps task ", request.ps_task(),
                     " reached ps task ", options_.ps_task));
  }
  CreateVariablesRequest definition = request;
  definition.clear_header();
  {
    absl::MutexLock lock(&mu_);
    if (run_ != nullptr && run_->run_id != run_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ps ", options_.ps_task, " already belongs to another run"));
    }
    if (run_ != nullptr) {
      if (run_->definition.SerializeAsString() !=
          definition.SerializeAsString()) {
        return absl::AlreadyExistsError(absl::StrCat(
            "run '", run_id, "' already created other variables on ps ",
            options_.ps_task));
      }
      response->set_num_variables(run_->dense.size() + run_->tables.size());
      int64_t bytes = 0;
      for (const auto& [name, v] : run_->dense) bytes += v->bytes_held();
      for (const auto& [name, t] : run_->tables) bytes += t->bytes_held();
      response->set_num_bytes(bytes);
      return absl::OkStatus();
    }
  }

  auto run = std::make_unique<Run>();
  run->run_id = run_id;
  PSTRAIN_ASSIGN_OR_RETURN(run->optimizer,
                           CreateOptimizer(request.optimizer()));
  PSTRAIN_RETURN_IF_ERROR(CheckUpdateConfig(request.update()));
  run->update = request.update();
  run->replicas_to_aggregate = ReplicasToAggregate(request.update());
  run->nan_policy = options_.nan_policy.value_or(request.update().nan_policy());
  run->step_timeout =
      StepTimeout(request.update(), options_.default_step_timeout);
  // Embedding tables may have an optimizer of their own
  // (--embedding_optimizer).
  std::map<std::string, const Optimizer*> own_optimizer;
  for (const ShardVariable& variable : request.variables()) {
    const VariableDef& def = variable.def();
    if (!def.has_optimizer()) continue;
    if (!def.sparse()) {
      return VariableError(def.name(),
                           "only an embedding table (sparse) has "
                           "an optimizer of its own");
    }
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        CreateOptimizer(def.optimizer());
    if (!optimizer.ok()) {
      return VariableError(def.name(), optimizer.status().message());
    }
    own_optimizer[def.name()] = optimizer->get();
    run->table_optimizers.push_back(*std::move(optimizer));
  }
  const auto optimizer_of = [&](const VariableDef& def) {
    auto it = own_optimizer.find(def.name());
    return it == own_optimizer.end() ? run->optimizer.get() : it->second;
  };
  PSTRAIN_RETURN_IF_ERROR(CheckShardBytes(
      request, options_.ps_task,
      [&](const VariableDef& def) { return 1 + optimizer_of(def)->NumSlots(); },
      options_.max_bytes));
  int64_t bytes = 0;
  for (const ShardVariable& variable : request.variables()) {
    const VariableDef& def = variable.def();
    if (def.name().empty()) {
      return absl::InvalidArgumentError("variable with an empty name");
    }
    if (def.dtype() != DT_FLOAT) {
      return VariableError(def.name(), absl::StrCat(
          "dtype ", DataTypeName(def.dtype()),
          " is not stored yet (only float32)"));
    }
    if (def.sparse() && def.has_moving_average()) {
      return VariableError(def.name(),
                           "a moving average cannot be an embedding table");
    }
    if (def.sparse() &&
        variable.placement().partitioning() == VariablePlacement::ROW_HASH) {
      if (def.shape().dims_size() < 2 || def.shape().dims(0) != 0) {
        return VariableError(def.name(), "a hashed (growing) table needs shape "
                                         "[0, width...]");
      }
      const auto& slices = variable.placement().slices();
      for (int i = 0; i < slices.size(); ++i) {
        if (slices[i].ps_task() != options_.ps_task) continue;
        PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingTable> table,
                                 EmbeddingTable::CreateGrowing(
                                     def, i, slices.size(), optimizer_of(def)));
        if (!run->tables.emplace(def.name(), std::move(table)).second) {
          return VariableError(def.name(), "placed twice on this ps");
        }
      }
      continue;
    }
    int64_t begin = 0, end = 0;
    PSTRAIN_ASSIGN_OR_RETURN(
        const bool here, PieceOnTask(variable, options_.ps_task, &begin, &end));
    if (!here) continue;
    if (def.sparse()) {
      PSTRAIN_ASSIGN_OR_RETURN(
          std::unique_ptr<EmbeddingTable> table,
          EmbeddingTable::CreateFixed(def, begin, end, optimizer_of(def)));
      bytes += table->bytes_held();
      if (!run->tables.emplace(def.name(), std::move(table)).second) {
        return VariableError(def.name(), "defined twice");
      }
      continue;
    }
    const Optimizer* optimizer = run->optimizer.get();
    if (def.has_moving_average()) {
      absl::StatusOr<std::unique_ptr<Optimizer>> average =
          CreateMovingAverage(def.moving_average().momentum());
      if (!average.ok()) {
        return VariableError(def.name(), average.status().message());
      }
      optimizer = average->get();
      run->moving_averages.push_back(*std::move(average));
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        std::unique_ptr<DenseVariable> piece,
        DenseVariable::Create(def, begin, end, optimizer));
    bytes += piece->bytes_held();
    run->dense_bytes += piece->num_bytes();
    if (!run->dense.emplace(def.name(), std::move(piece)).second) {
      return VariableError(def.name(), "defined twice");
    }
  }
  for (const auto& [name, v] : run->dense) {
    v->SetWorkers(run->replicas_to_aggregate, {});
  }
  for (const auto& [name, t] : run->tables) {
    t->SetWorkers(run->replicas_to_aggregate, {});
  }
  run->definition = std::move(definition);
  response->set_num_variables(run->dense.size() + run->tables.size());
  response->set_num_bytes(bytes);

  absl::MutexLock lock(&mu_);
  if (run_ != nullptr) {
    // A concurrent CreateVariables won; it must have been the same one.
    return run_->run_id == run_id &&
                   run_->definition.SerializeAsString() ==
                       run->definition.SerializeAsString()
               ? absl::OkStatus()
               : absl::AlreadyExistsError(absl::StrCat(
                     "ps ", options_.ps_task, " was created concurrently by "
                     "another request"));
  }
  run_ = std::move(run);
  return absl::OkStatus();
}

absl::Status Shard::PullDense(
    const PullDenseRequest& request,
    const std::function<void(const DenseVariable&, const ValueView&)>& emit) {
  return PullDense(request,
                   [&emit](const DenseVariable& v, const DensePart*,
                           const ValueView& value) { emit(v, value); });
}

absl::StatusOr<std::map<std::string, DensePart>> Shard::CheckParts(
    const Run& run,
    const google::protobuf::RepeatedPtrField<VariablePart>& parts) const {
  std::map<std::string, DensePart> checked;
  for (const VariablePart& p : parts) {
    auto it = run.dense.find(p.name());
    if (it == run.dense.end()) {
      return VariableError(
          p.name(), run.tables.count(p.name()) > 0
                        ? "is an embedding table: it is read and written by "
                          "id, not by a part"
                        : absl::StrCat("not held by ps ", options_.ps_task));
    }
    PSTRAIN_ASSIGN_OR_RETURN(DensePart part, CheckPart(p, it->second->def()));
    if (!checked.emplace(p.name(), part).second) {
      return VariableError(p.name(), "two parts of it in one request");
    }
  }
  return checked;
}

absl::Status Shard::PullDense(const PullDenseRequest& request,
                              const PullEmit& emit) {
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(request.header()));
  if (request.min_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_version ", request.min_version(), " is negative"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const auto parts, CheckParts(*run, request.parts()));
  std::vector<const DenseVariable*> variables;
  if (request.names().empty()) {
    for (const auto& [name, v] : run->dense) variables.push_back(v.get());
  } else {
    for (const std::string& name : request.names()) {
      auto it = run->dense.find(name);
      if (it == run->dense.end()) {
        return VariableError(name, absl::StrCat("not held by ps ",
                                                options_.ps_task));
      }
      variables.push_back(it->second.get());
    }
    std::sort(variables.begin(), variables.end(),
              [](const DenseVariable* a, const DenseVariable* b) {
                return a->name() < b->name();
              });
    // A name given twice is served once.
    variables.erase(std::unique(variables.begin(), variables.end()),
                    variables.end());
    for (const auto& [name, part] : parts) {
      if (std::find(request.names().begin(), request.names().end(), name) ==
          request.names().end()) {
        return VariableError(name, "a part of it, but it is not pulled");
      }
    }
  }
  const absl::Time deadline = absl::Now() + run->step_timeout;
  for (const DenseVariable* v : variables) {
    auto p = parts.find(v->name());
    const DensePart* part = p == parts.end() ? nullptr : &p->second;
    absl::StatusOr<int64_t> version = v->Read(
        request.min_version(), deadline, run->replicas_to_aggregate.load(),
        [&emit, v, part](const ValueView& value) {
          if (part == nullptr) return emit(*v, nullptr, value);
          // The part's rows on the piece: a range of the value's bytes
          // (rows), or gathered (columns).
          const PartRows rows =
              PartRowsOnPiece(*part, v->def(), v->row_begin(), v->row_end());
          ValueView view = value;
          view.size = rows.elements * 4;
          if (part->dim == 0) {
            if (rows.elements > 0) {
              view.data +=
                  PieceIndex(*part, v->def(), v->row_begin(), rows, 0) * 4;
            }
          } else {
            auto gathered = std::make_shared<std::vector<float>>(rows.elements);
            CopyPartOut(*part, v->def(), v->row_begin(), rows,
                        reinterpret_cast<const float*>(value.data),
                        gathered->data());
            view.data = reinterpret_cast<const char*>(gathered->data());
            view.owner = std::move(gathered);
          }
          emit(*v, part, view);
        });
    if (!version.ok()) return version.status();
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckGeneration(const RequestHeader& header) const {
  const int64_t generation = generation_.load();
  if (header.generation() == generation) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat(
      "request of generation ", header.generation(), ", but ps ",
      options_.ps_task, " serves generation ", generation,
      " (the run was restored from a checkpoint after a failure)"));
}

absl::Status Shard::CheckPresent(const Run& run, int worker) const {
  absl::MutexLock lock(&run.workers_mu);
  if (std::find(run.absent_workers.begin(), run.absent_workers.end(),
                worker) == run.absent_workers.end()) {
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      "worker ", worker, " was presumed dead and the other workers took over "
      "its share: it must register with the chief again"));
}

absl::Status Shard::PullSparse(const PullSparseRequest& request,
                              PullSparseResponse* response) {
  response->Clear();
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(request.header()));
  PSTRAIN_ASSIGN_OR_RETURN(EmbeddingTable * table,
                           FindTable(*run, request.name()));
  if (request.min_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_version ", request.min_version(), " is negative"));
  }
  PSTRAIN_RETURN_IF_ERROR(table->CheckIds(request.ids()));
  TensorProto* values = response->mutable_values();
  values->set_dtype(DT_FLOAT);
  values->mutable_shape()->add_dims(request.ids_size());
  values->mutable_shape()->add_dims(table->width());
  std::string* content = values->mutable_content();
  content->resize(request.ids_size() * table->width() * sizeof(float));
  PSTRAIN_ASSIGN_OR_RETURN(
      const int64_t version,
      table->Read(
          request.ids(), request.min_version(), absl::Now() + run->step_timeout,
          reinterpret_cast<float*>(content->data()), request.read_only()));
  response->set_version(version);
  return absl::OkStatus();
}

bool Shard::SparseReady(const std::string& name, int64_t min_version) const {
  const EmbeddingTable* table = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (run_ == nullptr) return false;
    auto it = run_->tables.find(name);
    if (it == run_->tables.end()) return false;
    table = it->second.get();
  }
  // As PullSparse uses the run's tables, outside the lock.
  return table->version() >= min_version;
}

void Shard::InterruptPulls(const std::string& why) {
  const Run* run = nullptr;
  {
    absl::MutexLock lock(&mu_);
    run = run_.get();
  }
  if (run == nullptr) return;
  for (const auto& [name, v] : run->dense) v->Interrupt(why);
  for (const auto& [name, t] : run->tables) t->Interrupt(why);
}

absl::Status Shard::SetWorkers(const SetWorkersRequest& request,
                              SetWorkersResponse* response) {
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  const int workers = run->update.num_workers();
  if (run->update.mode() != UpdateConfig::SYNC) {
    return absl::FailedPreconditionError(
        "SetWorkers: the run is not in sync mode");
  }
  if (request.replicas_to_aggregate() < 1 ||
      request.replicas_to_aggregate() > workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SetWorkers: replicas_to_aggregate ", request.replicas_to_aggregate(),
        " is not in [1, ", workers, "]"));
  }
  for (int worker : request.absent_workers()) {
    if (worker < 0 || worker >= workers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SetWorkers: absent worker ", worker, " is not in [0, ", workers,
          ")"));
    }
  }
  {
    absl::MutexLock lock(&run->workers_mu);
    run->absent_workers.assign(
        request.absent_workers().begin(), request.absent_workers().end());
  }
  const int needed = request.replicas_to_aggregate();
  run->replicas_to_aggregate = needed;
  int64_t version = -1;
  for (const auto& [name, v] : run->dense) {
    v->SetWorkers(needed, request.absent_workers());
    version = version < 0 ? v->version() : std::min(version, v->version());
  }
  for (const auto& [name, t] : run->tables) {
    t->SetWorkers(needed, request.absent_workers());
    version = version < 0 ? t->version() : std::min(version, t->version());
  }
  response->set_version(version);  // -1: no variables here
  return absl::OkStatus();
}

std::map<int64_t, int> Shard::BatchesApplied() const {
  absl::MutexLock lock(&ledger_mu_);
  return batches_applied_;
}

std::string Shard::run_id() const {
  absl::MutexLock lock(&mu_);
  return run_ == nullptr ? "" : run_->run_id;
}

std::map<std::string, int64_t> Shard::EmbeddingRows() const {
  std::map<std::string, int64_t> rows;
  const Run* run;
  {
    // Set once, then only read (as GetShardStatus reads it).
    absl::MutexLock lock(&mu_);
    run = run_.get();
  }
  if (run == nullptr) return rows;
  for (const auto& [name, table] : run->tables) rows[name] = table->num_rows();
  return rows;
}

int64_t Shard::DenseBytes() const {
  absl::MutexLock lock(&mu_);
  return run_ == nullptr ? 0 : run_->dense_bytes;
}

absl::Status Shard::GetShardStatus(const GetShardStatusRequest& request,
                                   ShardStatus* status) {
  status->set_ps_task(options_.ps_task);
  status->set_pushes_applied(pushes_applied_.load());
  status->set_pushes_dropped_stale(pushes_dropped_stale_.load());
  status->set_pushes_refused(pushes_refused_.load());
  status->set_generation(generation_.load());
  {
    absl::MutexLock lock(&mu_);
    // No run yet (run_id ""): a ps that just (re)started.
    if (run_ == nullptr) return absl::OkStatus();
  }
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  status->set_run_id(run->run_id);
  status->set_num_variables(run->dense.size() + run->tables.size());
  int64_t bytes = 0, slot_bytes = 0;
  int64_t version = -1;
  auto add = [&](const std::string& name, const auto& piece) {
    bytes += piece->bytes_held();
    slot_bytes += piece->slot_bytes();
    const int64_t v = piece->version();
    (*status->mutable_variable_versions())[name] = v;
    version = version < 0 ? v : std::min(version, v);
  };
  for (const auto& [name, v] : run->dense) add(name, v);
  for (const auto& [name, t] : run->tables) {
    add(name, t);
    ShardStatus::EmbeddingTableStatus& table =
        (*status->mutable_embedding_tables())[name];
    table.set_rows(t->num_rows());
    table.set_bytes_per_row(t->bytes_per_row());
    table.set_metadata_bytes(t->metadata_bytes());
    table.set_pending_ids(t->num_pending());
    table.set_rows_expired(t->rows_expired());
    table.set_rows_evicted(t->rows_evicted());
  }
  status->set_num_bytes(bytes);
  status->set_num_slot_bytes(slot_bytes);
  status->set_version(std::max<int64_t>(version, 0));
  for (const auto& [batch, count] : BatchesApplied()) {
    (*status->mutable_batches_applied())[batch] = count;
  }
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace pstrain
