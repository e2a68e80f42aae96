#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/placement.h"
#include "common/status_context.h"
#include "common/status_macros.h"
#include "ps/dense_call.h"
#include "ps/ps_client.h"

// PsClusterClient (declared in ps/ps_client.h): routes whole variables to
// the ps tasks holding them, in parallel.

namespace pstrain {
namespace ps {

absl::StatusOr<int64_t> PsClusterClient::SetWorkers(
    int replicas, absl::Span<const int> absent) {
  int64_t version = -1;
  for (auto& client : clients_) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t v,
                             client->SetWorkers(replicas, absent));
    // A ps task holding no variables (-1) collects no step.
    if (v >= 0) version = version < 0 ? v : std::min(version, v);
  }
  return std::max<int64_t>(version, 0);
}

absl::StatusOr<std::unique_ptr<PsClusterClient>> PsClusterClient::Create(
    std::vector<std::unique_ptr<PsClient>> clients, const Placement& placement,
    absl::Span<const VariableDef> variables) {
  if (clients.empty() ||
      placement.num_ps() != static_cast<int>(clients.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement is for ", placement.num_ps(), " ps tasks, ",
                     clients.size(), " clients given"));
  }
  std::map<std::string, VariableDef> defs;
  for (const VariableDef& def : variables) defs[def.name()] = def;
  for (const VariablePlacement& p : placement.variables()) {
    if (defs.count(p.name()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement names unknown variable '", p.name(), "'"));
    }
  }
  return std::unique_ptr<PsClusterClient>(
      new PsClusterClient(std::move(clients), placement, std::move(defs)));
}

PsClusterClient::PsClusterClient(std::vector<std::unique_ptr<PsClient>> clients,
                                 Placement placement,
                                 std::map<std::string, VariableDef> defs)
    : clients_(std::move(clients)),
      placement_(std::move(placement)),
      defs_(std::move(defs)),
      pool_(std::max<int>(1, clients_.size() - 1)) {}

absl::Status PsClusterClient::FirstError(
    absl::Span<const absl::Status> results) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      return WithContext(absl::StrCat("ps ", i), results[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status PsClusterClient::ForEachPs(
    const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> results(clients_.size());
  absl::BlockingCounter done(clients_.size() - 1);
  for (size_t i = 1; i < clients_.size(); ++i) {
    pool_.Schedule([&, i] {
      results[i] = fn(i);
      done.DecrementCount();
    });
  }
  results[0] = fn(0);
  done.Wait();
  return FirstError(results);
}

absl::Status PsClusterClient::CreateVariables(const OptimizerConfig& optimizer,
                                              const UpdateConfig& update) {
  return ForEachPs([&](int task) {
    CreateVariablesRequest request;
    request.set_ps_task(task);
    *request.mutable_optimizer() = optimizer;
    *request.mutable_update() = update;
    for (const VariablePlacement& p : placement_.variables()) {
      ShardVariable* v = request.add_variables();
      *v->mutable_def() = defs_.at(p.name());
      *v->mutable_placement() = p;
    }
    CreateVariablesResponse response;
    return clients_[task]->CreateVariables(std::move(request), &response);
  });
}

absl::Status PsClusterClient::HoldParts(
    const std::map<std::string, DensePart>& parts) {
  for (const auto& [name, part] : parts) {
    auto def = defs_.find(name);
    if (def == defs_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", name, "': not a variable of the run"));
    }
    VariablePart p;
    p.set_name(name);
    p.set_dim(part.dim);
    p.set_begin(part.begin);
    p.set_end(part.end);
    PSTRAIN_RETURN_IF_ERROR(CheckPart(p, def->second).status());
  }
  parts_ = parts;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<DensePiece>>> PsClusterClient::Pieces(
    const std::map<std::string, Tensor*>& tensors) const {
  std::vector<std::vector<DensePiece>> pieces(clients_.size());
  for (const VariablePlacement& p : placement_.variables()) {
    auto it = tensors.find(p.name());
    if (it == tensors.end()) continue;
    const VariableDef& def = defs_.at(p.name());
    Tensor* t = it->second;
    auto part = parts_.find(p.name());
    const std::vector<int64_t> dims =
        part == parts_.end() ? std::vector<int64_t>(def.shape().dims().begin(),
                                                    def.shape().dims().end())
                             : PartShape(def, part->second);
    if (t->dtype() != DT_FLOAT || t->shape() != dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", p.name(), "': tensor is ", DataTypeName(t->dtype()),
          " ", ShapeString(t->shape()), ", expected float32 ",
          ShapeString(dims), part == parts_.end() ? "" : " (its part)"));
    }
    TensorShapeProto shape;
    for (int64_t d : dims) shape.add_dims(d);
    const int64_t row_bytes = t->row_elements() * 4;
    for (const VariablePlacement::Slice& s : p.slices()) {
      DensePiece piece;
      piece.name = p.name();
      piece.shape = shape;
      piece.row_begin = s.row_begin();
      piece.row_end = s.row_end();
      if (part != parts_.end()) {
        // The part's rows on the piece: for a part of rows, those of
        // [begin, end) the piece holds (maybe none, still sent: the push
        // counts for the piece's sync step); for columns, all of them.
        const PartRows rows =
            PartRowsOnPiece(part->second, def, s.row_begin(), s.row_end());
        piece.part = part->second;
        piece.row_begin = rows.begin;
        piece.row_end = rows.end;
      }
      piece.data =
          static_cast<char*>(t->raw_data()) + piece.row_begin * row_bytes;
      piece.size = (piece.row_end - piece.row_begin) * row_bytes;
      pieces[s.ps_task()].push_back(std::move(piece));
    }
  }
  return pieces;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> PsClusterClient::RouteIds(
    const std::string& name, absl::Span<const int64_t> ids,
    int64_t* width) const {
  const VariablePlacement* placement = nullptr;
  for (const VariablePlacement& p : placement_.variables()) {
    if (p.name() == name) placement = &p;
  }
  auto def = defs_.find(name);
  if (placement == nullptr || def == defs_.end() || !def->second.sparse()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not an embedding table of the run"));
  }
  *width = 1;
  for (int i = 1; i < def->second.shape().dims_size(); ++i) {
    *width *= def->second.shape().dims(i);
  }
  std::vector<std::vector<int64_t>> positions(clients_.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(const int slice, SliceForRow(*placement, ids[i]));
    positions[placement->slices(slice).ps_task()].push_back(i);
  }
  return positions;
}

absl::Status PsClusterClient::PullRows(const std::string& name,
                                       absl::Span<const int64_t> ids,
                                       int64_t min_version, bool read_only,
                                       float* out) {
  int64_t width = 0;
  PSTRAIN_ASSIGN_OR_RETURN(auto positions, RouteIds(name, ids, &width));
  return ForEachPs([&](int task) -> absl::Status {
    if (positions[task].empty()) return absl::OkStatus();
    std::vector<int64_t> task_ids;
    for (int64_t p : positions[task]) task_ids.push_back(ids[p]);
    PSTRAIN_ASSIGN_OR_RETURN(
        PullSparseResponse response,
        clients_[task]->PullSparse(name, task_ids, min_version, read_only));
    // A row per id asked for, in order.
    const std::string& values = response.values().content();
    if (static_cast<int64_t>(values.size()) !=
        static_cast<int64_t>(task_ids.size()) * width * 4) {
      return absl::InternalError(
          absl::StrCat("ps sent ", values.size(), " bytes of rows of '", name,
                       "' for ", task_ids.size(), " ids of width ", width));
    }
    for (size_t i = 0; i < task_ids.size(); ++i) {
      std::memcpy(out + positions[task][i] * width,
                  values.data() + i * width * 4, width * 4);
    }
    return absl::OkStatus();
  });
}

absl::Status PsClusterClient::PushSparse(const std::string& name,
                                         absl::Span<const int64_t> ids,
                                         const float* rows, int64_t version,
                                         int64_t batch_size) {
  int64_t width = 0;
  PSTRAIN_ASSIGN_OR_RETURN(auto positions, RouteIds(name, ids, &width));
  return ForEachPs([&](int task) -> absl::Status {
    if (positions[task].empty()) return absl::OkStatus();
    std::vector<int64_t> task_ids;
    std::vector<float> task_rows;
    for (int64_t p : positions[task]) {
      task_ids.push_back(ids[p]);
      task_rows.insert(task_rows.end(), rows + p * width,
                       rows + (p + 1) * width);
    }
    return clients_[task]
        ->PushSparse(name, task_ids, task_rows, width, version, batch_size)
        .status();
  });
}

template <typename Result, typename Start, typename Again>
absl::Status PsClusterClient::OnEveryPs(
    const std::vector<std::vector<DensePiece>>& pieces, Start start,
    Again again, std::vector<Result>* results) {
  {
    CallQueue cq;
    std::vector<std::unique_ptr<DenseCall>> calls;
    std::vector<DenseCall*> started;
    for (size_t task = 0; task < clients_.size(); ++task) {
      if (pieces[task].empty()) continue;
      calls.push_back(start(task, cq.get(), &(*results)[task]));
      started.push_back(calls.back().get());
    }
    RunCalls(started, cq.get());
  }
  std::vector<absl::Status> statuses(clients_.size());
  bool unavailable = false;
  for (size_t task = 0; task < clients_.size(); ++task) {
    if (pieces[task].empty()) continue;
    statuses[task] = (*results)[task].status();
    unavailable |= absl::IsUnavailable(statuses[task]);
  }
  if (!unavailable) return FirstError(statuses);
  // Tried again as one client's call is, the tasks in parallel (the first
  // attempt of `again` is already a retry).
  return ForEachPs([&](int task) {
    if (!absl::IsUnavailable(statuses[task])) return statuses[task];
    const RetryOptions& retry = clients_[task]->options().retry;
    if (retry.on_retry) retry.on_retry();
    (*results)[task] = again(task);
    return (*results)[task].status();
  });
}

absl::Status PsClusterClient::PushDense(
    int64_t version, int64_t batch_size,
    const std::map<std::string, Tensor*>& gradients) {
  PSTRAIN_ASSIGN_OR_RETURN(auto pieces, Pieces(gradients));
  std::vector<PushDenseRequest> firsts(clients_.size());
  std::vector<absl::StatusOr<PushDenseResponse>> results(clients_.size());
  return OnEveryPs(
      pieces,
      [&](int task, grpc::CompletionQueue* cq,
          absl::StatusOr<PushDenseResponse>* result) {
        firsts[task] = clients_[task]->NewPush(version, batch_size);
        return clients_[task]->StartPush(firsts[task], pieces[task], cq,
                                         result);
      },
      // The same request id: the ps applies the push once.
      [&](int task) {
        return clients_[task]->PushDense(firsts[task], pieces[task]);
      },
      &results);
}

absl::StatusOr<int64_t> PsClusterClient::PullDense(
    int64_t min_version, const std::map<std::string, Tensor*>& values) {
  PSTRAIN_ASSIGN_OR_RETURN(auto pieces, Pieces(values));
  std::vector<PullDenseRequest> requests(clients_.size());
  std::vector<absl::StatusOr<int64_t>> results(clients_.size(), INT64_MAX);
  PSTRAIN_RETURN_IF_ERROR(OnEveryPs(
      pieces,
      [&](int task, grpc::CompletionQueue* cq,
          absl::StatusOr<int64_t>* result) {
        requests[task] = clients_[task]->NewPull(min_version, pieces[task]);
        return clients_[task]->StartPull(requests[task], pieces[task], cq,
                                         result);
      },
      [&](int task) {
        return clients_[task]->PullDense(requests[task], pieces[task]);
      },
      &results));
  int64_t lowest = INT64_MAX;
  for (const absl::StatusOr<int64_t>& version : results) {
    lowest = std::min(lowest, *version);
  }
  return lowest == INT64_MAX ? min_version : lowest;
}

}  // namespace ps
}  // namespace pstrain
