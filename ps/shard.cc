#include "ps/shard.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "ps/staleness.h"

namespace pstrain {
namespace ps {
namespace {

// An owed push (RequestHeader.owed) must be a worker's sync push naming the
// batches it owes.
absl::Status CheckOwed(const UpdateConfig& update, const RequestHeader& header,
                       int worker) {
  if (!header.owed()) return absl::OkStatus();
  if (update.mode() != UpdateConfig::SYNC || worker < 0 ||
      header.batches().empty()) {
    return absl::InvalidArgumentError(
        "an owed push must be a worker's sync push naming its batches");
  }
  return absl::OkStatus();
}

// What a sync push of `header` from `worker` (< 0: not a worker) adds to a
// step.
Contribution SyncContribution(const RequestHeader& header, int worker,
                              int64_t batch_size, bool skip_update) {
  Contribution c;
  c.sender = worker;
  c.batches = header.batches();
  c.owed = header.owed();
  c.batch_size = batch_size;
  c.skip_update = skip_update;
  return c;
}

absl::Status VariableError(absl::string_view name, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("variable '", name, "': ", problem));
}

// Appends the content `pieces` of a gradient that starts at byte `offset` of
// its piece to *chunks, as runs of whole floats. A float split between two
// pieces (gRPC's buffers end anywhere) is copied into *stitched, which has
// room reserved for one per piece. The content is whole floats (checked
// before).
void AddWholeFloats(int64_t offset, absl::Span<const absl::string_view> pieces,
                    std::vector<Chunk>* chunks,
                    std::vector<std::array<char, 4>>* stitched) {
  std::array<char, 4> partial;
  size_t partial_size = 0;
  for (absl::string_view piece : pieces) {
    if (partial_size > 0) {
      const size_t n = std::min(4 - partial_size, piece.size());
      std::memcpy(partial.data() + partial_size, piece.data(), n);
      partial_size += n;
      piece.remove_prefix(n);
      if (partial_size < 4) continue;
      stitched->push_back(partial);
      chunks->push_back(
          Chunk{offset, absl::string_view(stitched->back().data(), 4)});
      offset += 4;
      partial_size = 0;
    }
    const size_t whole = piece.size() & ~size_t{3};
    if (whole > 0) {
      chunks->push_back(Chunk{offset, piece.substr(0, whole)});
      offset += whole;
    }
    partial_size = piece.size() - whole;
    std::memcpy(partial.data(), piece.data() + whole, partial_size);
  }
}

// What identifies an async push among its sender's: the worker's step when
// the header has one (a step redone is the same push), else the request id
// (a retry is). Tagged in the low bit, so the two never collide; 0: none.
uint64_t PushKey(const RequestHeader& header) {
  if (header.has_step()) return static_cast<uint64_t>(header.step()) << 1 | 1;
  return header.request_id() << 1;
}

// The reply recorded under `key` for sender `who` in `recent`, if any.
template <typename Who, typename Response>
const Response* FindRecorded(
    const std::map<Who, std::vector<std::pair<uint64_t, Response>>>& recent,
    const Who& who, uint64_t key) {
  auto it = recent.find(who);
  if (it == recent.end()) return nullptr;
  for (const auto& [id, response] : it->second) {
    if (id == key) return &response;
  }
  return nullptr;
}

std::vector<int64_t> Dims(const TensorShapeProto& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

absl::Status CheckUpdateConfig(const UpdateConfig& update) {
  if (update.mode() != UpdateConfig::SYNC &&
      update.mode() != UpdateConfig::ASYNC) {
    return absl::InvalidArgumentError(
        "update.mode: must be SYNC or ASYNC");
  }
  if (update.num_workers() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.num_workers: ", update.num_workers(), " must be >= 1"));
  }
  if (update.replicas_to_aggregate() < 0 ||
      update.replicas_to_aggregate() > update.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.replicas_to_aggregate: ", update.replicas_to_aggregate(),
        " must be in [0, num_workers ", update.num_workers(), "]"));
  }
  if (update.step_timeout_ms() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.step_timeout_ms: ", update.step_timeout_ms(), " is negative"));
  }
  return absl::OkStatus();
}

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
            def.name(), absl::StrCat("shape ", ShapeString(Dims(def.shape())),
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

absl::StatusOr<EmbeddingTable*> FindTable(
    const std::map<std::string, std::unique_ptr<EmbeddingTable>>& tables,
    const std::string& name, int ps_task) {
  auto it = tables.find(name);
  if (it == tables.end()) {
    return VariableError(name, absl::StrCat("not an embedding table held by ps ",
                                            ps_task));
  }
  return it->second.get();
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
  run->replicas_to_aggregate = request.update().replicas_to_aggregate() > 0
                                   ? request.update().replicas_to_aggregate()
                                   : request.update().num_workers();
  run->nan_policy = options_.nan_policy.value_or(request.update().nan_policy());
  run->step_timeout = request.update().step_timeout_ms() > 0
                          ? absl::Milliseconds(request.update().step_timeout_ms())
                          : options_.default_step_timeout;
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
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(request.header()));
  if (request.min_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_version ", request.min_version(), " is negative"));
  }
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
  }
  const absl::Time deadline = absl::Now() + run->step_timeout;
  for (const DenseVariable* v : variables) {
    absl::StatusOr<int64_t> version =
        v->Read(request.min_version(), deadline, run->replicas_to_aggregate.load(),
                [&emit, v](const ValueView& value) { emit(*v, value); });
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

absl::Status Shard::Refuse(absl::Status status) {
  pushes_refused_.fetch_add(1, std::memory_order_relaxed);
  return status;
}

absl::Status Shard::CheckPushVersion(const Run& run, const std::string& name,
                                     int64_t version, int64_t current) {
  if (version > current) {
    // The pusher has seen versions this shard never had: the ps restarted
    // and was created anew, and the chief has not restored it yet (or the
    // push is wrong). ABORTED, as for a push of another generation: the
    // worker asks the chief how to go on, which brings it to the restored
    // run.
    return Refuse(absl::AbortedError(absl::StrCat(
        "variable '", name, "': gradient computed from version ", version,
        ", but the variable is at version ", current,
        " (a version from the future: was this ps restarted?)")));
  }
  const int staleness = run.update.max_staleness();
  if (run.update.mode() == UpdateConfig::ASYNC && staleness >= 0 &&
      current > version + staleness) {
    return Refuse(StaleGradientError(absl::StrCat(
        "variable '", name, "': gradient computed from version ", version,
        " is too stale: the variable is at version ", current, ", beyond ",
        version, " + max_staleness ", staleness)));
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckFinite(const Run& run, const std::string& name,
                                const Chunk& chunk, bool* skip) {
  // A float is NaN or Inf iff its exponent bits are all ones. This branch-
  // free pass vectorizes; the slow search below runs only on a bad gradient.
  const char* bytes = chunk.data.data();
  const int64_t count = chunk.data.size() / 4;
  uint32_t all_ones = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes + 4 * i, 4);
    all_ones |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (all_ones == 0) return absl::OkStatus();
  for (int64_t i = 0; i < count; ++i) {
    float g;
    std::memcpy(&g, bytes + 4 * i, 4);
    if (std::isfinite(g)) continue;
    if (run.nan_policy == NAN_SKIP_STEP) {
      *skip = true;
      return absl::OkStatus();
    }
    absl::Status status = VariableError(
        name, absl::StrCat("gradient element ", chunk.offset / 4 + i, " is ",
                           std::isnan(g) ? "NaN" : "Inf", " (nan_policy ",
                           NanPolicy_Name(run.nan_policy), ")"));
    if (run.nan_policy == NAN_ABORT && options_.on_abort) {
      options_.on_abort(status);
    }
    return Refuse(std::move(status));
  }
  return absl::OkStatus();
}

absl::StatusOr<PushDenseResponse> Shard::PushDense(
    absl::Span<const PushDenseRequest* const> messages) {
  std::vector<PushDenseView> views;
  views.reserve(messages.size());
  for (const PushDenseRequest* message : messages) {
    views.push_back(ViewOf(*message));
  }
  std::vector<const PushDenseView*> pointers;
  for (const PushDenseView& view : views) pointers.push_back(&view);
  return PushDense(pointers);
}

absl::StatusOr<PushDenseResponse> Shard::PushDense(
    absl::Span<const PushDenseView* const> messages) {
  if (messages.empty()) {
    return Refuse(absl::InvalidArgumentError("push has no messages"));
  }
  const PushDenseRequest& first = messages[0]->header;
  absl::StatusOr<const Run*> checked = CheckRun(first.header());
  if (!checked.ok()) return Refuse(checked.status());
  const Run* run = *checked;
  absl::ReaderMutexLock apply_lock(&apply_mu_);
  absl::Status generation_ok = CheckGeneration(first.header());
  if (!generation_ok.ok()) return Refuse(generation_ok);
  const TaskRef& sender = first.header().sender();
  const int worker = sender.job() == JOB_WORKER ? sender.index() : -1;
  if (absl::Status present = CheckPresent(*run, worker); !present.ok()) {
    return Refuse(present);
  }
  if (absl::Status owed = CheckOwed(run->update, first.header(), worker);
      !owed.ok()) {
    return Refuse(owed);
  }
  const int64_t version = first.version();
  const int64_t batch_size = first.batch_size();
  if (batch_size <= 0) {
    return Refuse(absl::InvalidArgumentError(
        absl::StrCat("batch_size ", batch_size, " must be > 0")));
  }
  if (version < 0) {
    return Refuse(absl::InvalidArgumentError(
        absl::StrCat("version ", version, " is negative")));
  }
  const uint64_t key = PushKey(first.header());
  const bool remember =
      run->update.mode() == UpdateConfig::ASYNC && worker >= 0 && key != 0;
  if (remember) {
    // A retry is answered from the record before the checks below: it
    // passed them when it was applied, and the staleness bound may refuse
    // it now.
    absl::MutexLock lock(&recent_mu_);
    if (const PushDenseResponse* earlier = FindRecorded(recent_, worker, key)) {
      return *earlier;
    }
  }

  // Check every gradient chunk before touching anything.
  std::map<DenseVariable*, std::vector<Chunk>> pushed;
  size_t num_pieces = 0;
  for (const PushDenseView* message : messages) {
    num_pieces += message->pieces.size();
  }
  // Floats split between two of gRPC's buffers, copied whole; reserved so
  // that Chunks may point into it.
  std::vector<std::array<char, 4>> stitched;
  stitched.reserve(num_pieces);
  for (const PushDenseView* message : messages) {
    for (int i = 0; i < message->header.gradients_size(); ++i) {
      const NamedTensor& gradient = message->header.gradients(i);
      const std::string& name = gradient.name();
      auto it = run->dense.find(name);
      if (it == run->dense.end()) {
        return Refuse(VariableError(
            name, absl::StrCat("not held by ps ", options_.ps_task)));
      }
      DenseVariable* v = it->second.get();
      const TensorProto& t = gradient.tensor();
      if (t.dtype() != DT_FLOAT) {
        return Refuse(VariableError(
            name, absl::StrCat("gradient dtype ", DataTypeName(t.dtype()),
                               ", expected float32")));
      }
      if (Dims(t.shape()) != Dims(v->def().shape())) {
        return Refuse(VariableError(
            name, absl::StrCat("gradient shape ", ShapeString(Dims(t.shape())),
                               " does not match the variable's ",
                               ShapeString(Dims(v->def().shape())))));
      }
      const int64_t rows = t.shape().dims_size() == 0 ? 1 : t.shape().dims(0);
      const int64_t begin = t.has_slice() ? t.slice().begin() : 0;
      const int64_t end = t.has_slice() ? t.slice().end() : rows;
      if (begin != v->row_begin() || end != v->row_end()) {
        return Refuse(VariableError(
            name, absl::StrCat("gradient rows [", begin, ", ", end, ") but ps ",
                               options_.ps_task, " holds rows [",
                               v->row_begin(), ", ", v->row_end(), ")")));
      }
      const int64_t offset = t.content_offset();
      const int64_t size = message->ContentSize(i);
      if (offset < 0 || offset % 4 != 0 || size % 4 != 0 ||
          offset > v->num_bytes() - size) {
        return Refuse(VariableError(
            name, absl::StrCat("gradient chunk of ", size, " bytes at offset ",
                               offset, " does not fit its ", v->num_bytes(),
                               " bytes in whole floats")));
      }
      AddWholeFloats(offset, message->Content(i), &pushed[v], &stitched);
    }
  }
  bool skip_update = false;
  for (auto& [v, chunks] : pushed) {
    std::sort(chunks.begin(), chunks.end(),
              [](const Chunk& a, const Chunk& b) { return a.offset < b.offset; });
    int64_t covered = 0;
    for (const Chunk& chunk : chunks) {
      if (chunk.offset != covered) {
        return Refuse(VariableError(
            v->name(), absl::StrCat("gradient chunks overlap or leave a gap: "
                                    "a chunk starts at byte ", chunk.offset,
                                    ", expected byte ", covered)));
      }
      covered += chunk.data.size();
    }
    if (covered != v->num_bytes()) {
      return Refuse(VariableError(
          v->name(), absl::StrCat("gradient chunks cover ", covered, " of its ",
                                  v->num_bytes(), " bytes")));
    }
    PSTRAIN_RETURN_IF_ERROR(
        CheckPushVersion(*run, v->name(), version, v->version()));
    for (const Chunk& chunk : chunks) {
      PSTRAIN_RETURN_IF_ERROR(
          CheckFinite(*run, v->name(), chunk, &skip_update));
    }
  }

  PushDenseResponse response;
  bool applied = true;
  if (remember) {
    // Recorded before applying, so a retry racing the original is answered
    // as applied rather than applied twice.
    absl::MutexLock lock(&recent_mu_);
    if (const PushDenseResponse* earlier = FindRecorded(recent_, worker, key)) {
      return *earlier;
    }
    auto& recent = recent_[worker];
    PushDenseResponse pending;
    pending.set_version(version + 1);
    pending.set_applied(true);
    if (recent.size() >= 16) recent.erase(recent.begin());
    recent.emplace_back(key, pending);
  }
  // Whether this push added its batches (not a late push, not one counted
  // before).
  bool added = false;
  if (run->update.mode() == UpdateConfig::SYNC) {
    const Contribution contribution =
        SyncContribution(first.header(), worker, batch_size, skip_update);
    for (auto& [v, chunks] : pushed) {
      const DenseVariable::Accumulated result =
          v->AccumulateSync(version, chunks, contribution);
      applied &= result != DenseVariable::Accumulated::kDropped;
      added |= result == DenseVariable::Accumulated::kAdded;
    }
    response.set_version(version + 1);
  } else if (skip_update) {
    applied = false;
    response.set_version(version);
  } else {
    int64_t new_version = 0;
    for (auto& [v, chunks] : pushed) {
      new_version = std::max(new_version, v->ApplyAsync(batch_size, chunks));
    }
    added = true;
    response.set_version(new_version);
  }
  if (added && !skip_update) CountBatches(first.header());
  response.set_applied(applied);
  (applied ? pushes_applied_ : pushes_dropped_stale_)
      .fetch_add(1, std::memory_order_relaxed);
  if (remember) {
    absl::MutexLock lock(&recent_mu_);
    for (auto& [id, earlier] : recent_[worker]) {
      if (id == key) earlier = response;
    }
  }
  return response;
}

absl::Status Shard::PullSparse(const PullSparseRequest& request,
                              PullSparseResponse* response) {
  response->Clear();
  PSTRAIN_ASSIGN_OR_RETURN(const Run* run, CheckRun(request.header()));
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(request.header()));
  PSTRAIN_ASSIGN_OR_RETURN(
      EmbeddingTable * table,
      FindTable(run->tables, request.name(), options_.ps_task));
  if (request.min_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_version ", request.min_version(), " is negative"));
  }
  PSTRAIN_RETURN_IF_ERROR(table->CheckIds(request.ids()));
  absl::flat_hash_map<int64_t, int> seen;
  for (int64_t id : request.ids()) {
    if (seen.emplace(id, response->ids_size()).second) response->add_ids(id);
  }
  TensorProto* values = response->mutable_values();
  values->set_dtype(DT_FLOAT);
  values->mutable_shape()->add_dims(response->ids_size());
  values->mutable_shape()->add_dims(table->width());
  std::string* content = values->mutable_content();
  content->resize(response->ids_size() * table->width() * sizeof(float));
  PSTRAIN_ASSIGN_OR_RETURN(
      const int64_t version,
      table->Read(response->ids(), request.min_version(),
                  absl::Now() + run->step_timeout,
                  reinterpret_cast<float*>(content->data())));
  response->set_version(version);
  return absl::OkStatus();
}

absl::Status Shard::PushSparse(const PushSparseRequest& request,
                              PushSparseResponse* response) {
  absl::StatusOr<const Run*> checked = CheckRun(request.header());
  if (!checked.ok()) return Refuse(checked.status());
  const Run& run = **checked;
  absl::ReaderMutexLock apply_lock(&apply_mu_);
  absl::Status generation_ok = CheckGeneration(request.header());
  if (!generation_ok.ok()) return Refuse(generation_ok);
  const TaskRef& sender = request.header().sender();
  const int worker = sender.job() == JOB_WORKER ? sender.index() : -1;
  absl::Status present = CheckPresent(run, worker);
  if (!present.ok()) return Refuse(present);
  absl::Status owed = CheckOwed(run.update, request.header(), worker);
  if (!owed.ok()) return Refuse(owed);
  absl::StatusOr<EmbeddingTable*> found =
      FindTable(run.tables, request.name(), options_.ps_task);
  if (!found.ok()) return Refuse(found.status());
  EmbeddingTable* table = *found;
  const std::string& name = request.name();
  if (request.batch_size() <= 0) {
    return Refuse(absl::InvalidArgumentError(
        absl::StrCat("batch_size ", request.batch_size(), " must be > 0")));
  }
  if (request.version() < 0) {
    return Refuse(absl::InvalidArgumentError(
        absl::StrCat("version ", request.version(), " is negative")));
  }
  // As PushDense: async, a repeated request id is answered from the record
  // (looked up first: the staleness bound may refuse a retry that passed it
  // when applied; entered before applying, so a retry racing the original
  // is answered as applied rather than applied twice); sync, AccumulateSync
  // counts each worker once per step.
  const uint64_t key = PushKey(request.header());
  const std::pair<int, std::string> who(worker, name);
  const bool remember =
      run.update.mode() == UpdateConfig::ASYNC && worker >= 0 && key != 0;
  if (remember) {
    absl::MutexLock lock(&recent_mu_);
    if (const PushSparseResponse* earlier =
            FindRecorded(recent_sparse_, who, key)) {
      *response = *earlier;
      return absl::OkStatus();
    }
  }
  const TensorProto& g = request.gradients();
  const std::vector<int64_t> expected = {request.ids_size(), table->width()};
  if (g.dtype() != DT_FLOAT || Dims(g.shape()) != expected || g.has_slice() ||
      g.content_offset() != 0 ||
      static_cast<int64_t>(g.content().size()) !=
          request.ids_size() * table->width() * 4) {
    return Refuse(VariableError(
        name, absl::StrCat("row gradients must be float32 ",
                           ShapeString(expected), " in one piece; got ",
                           DataTypeName(g.dtype()), " ",
                           ShapeString(Dims(g.shape())), " with ",
                           g.content().size(), " bytes")));
  }
  absl::Status ids_ok = table->CheckIds(request.ids());
  if (!ids_ok.ok()) return Refuse(ids_ok);
  PSTRAIN_RETURN_IF_ERROR(
      CheckPushVersion(run, name, request.version(), table->version()));
  const float* rows = reinterpret_cast<const float*>(g.content().data());
  bool skip_update = false;
  PSTRAIN_RETURN_IF_ERROR(
      CheckFinite(run, name, Chunk{0, g.content()}, &skip_update));

  // Sum the rows of duplicate ids.
  std::vector<int64_t> ids;
  std::vector<float> sums;
  absl::flat_hash_map<int64_t, int64_t> position;
  const int64_t width = table->width();
  for (int i = 0; i < request.ids_size(); ++i) {
    auto [it, inserted] = position.emplace(request.ids(i), ids.size());
    if (inserted) {
      ids.push_back(request.ids(i));
      sums.insert(sums.end(), rows + i * width, rows + (i + 1) * width);
    } else {
      float* sum = sums.data() + it->second * width;
      for (int64_t j = 0; j < width; ++j) sum[j] += rows[i * width + j];
    }
  }
  if (remember) {
    absl::MutexLock lock(&recent_mu_);
    if (const PushSparseResponse* earlier =
            FindRecorded(recent_sparse_, who, key)) {
      *response = *earlier;
      return absl::OkStatus();
    }
    auto& recent = recent_sparse_[who];
    PushSparseResponse pending;
    pending.set_version(request.version() + 1);
    pending.set_applied(true);
    if (recent.size() >= 16) recent.erase(recent.begin());
    recent.emplace_back(key, pending);
  }
  bool applied = true;
  if (run.update.mode() == UpdateConfig::SYNC) {
    applied = table->AccumulateSync(
        request.version(), ids, sums.data(),
        SyncContribution(request.header(), worker, request.batch_size(),
                         skip_update));
    response->set_version(request.version() + 1);
  } else if (skip_update) {
    applied = false;
    response->set_version(request.version());
  } else {
    response->set_version(
        table->ApplyAsync(ids, sums.data(), request.batch_size()));
  }
  response->set_applied(applied);
  (applied ? pushes_applied_ : pushes_dropped_stale_)
      .fetch_add(1, std::memory_order_relaxed);
  if (remember) {
    absl::MutexLock lock(&recent_mu_);
    for (auto& [id, earlier] : recent_sparse_[who]) {
      if (id == key) earlier = *response;
    }
  }
  return absl::OkStatus();
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

void Shard::CountBatches(const RequestHeader& header) {
  if (!options_.count_batches) return;
  absl::MutexLock lock(&ledger_mu_);
  for (int64_t batch : header.batches()) ++batches_applied_[batch];
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
