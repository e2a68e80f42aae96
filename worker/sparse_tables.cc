#include "worker/sparse_tables.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/placement.h"
#include "common/status_macros.h"
#include "data/model_input.h"
#include "model/dynamic_embeddings.h"

namespace pstrain {
namespace worker {

absl::StatusOr<std::unique_ptr<SparseTables>> SparseTables::Create(
    const ModelSpec& spec, const Placement& placement, ps::PsClusterClient* ps,
    bool sync, int64_t batch_rows) {
  std::vector<Table> tables;
  const std::vector<InputColumns> columns = ModelInputColumns(spec);
  for (const VariableDef& def : spec.variables) {
    if (!def.sparse()) continue;
    if (ps == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "embedding table '", def.name(),
          "' needs ps tasks to hold its rows; a collective run has none"));
    }
    const InputColumns* fed = nullptr;
    for (const LayerSpec& layer : spec.layers) {
      if (layer.kind == LayerKind::kEmbedding && layer.variables.size() == 1 &&
          layer.variables[0] == def.name() && layer.inputs[0].model_input) {
        fed = &columns[layer.inputs[0].index];
      }
    }
    if (fed == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "sparse variable '", def.name(),
          "' is not an Embedding table that reads a model input: nothing "
          "feeds it ids"));
    }
    const bool growing = IsGrowingTable(def);
    if (def.shape().dims_size() != 2 ||
        (def.shape().dims(0) <= 0 && !growing)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding table '", def.name(),
          "' needs shape [input_dim, output_dim] (input_dim 0: growing)"));
    }
    if (growing && batch_rows <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("growing embedding table '", def.name(),
                       "' needs the step's number of examples for its mirror"));
    }
    Table table;
    table.name = def.name();
    table.begin = fed->begin;
    table.count = fed->count;
    table.rows = growing ? LocalTableRows(spec, def.name(), batch_rows)
                         : def.shape().dims(0);
    table.width = def.shape().dims(1);
    if (growing) table.remap = std::make_unique<IdRemap>(table.rows);
    bool found = false;
    for (const VariablePlacement& p : placement.variables()) {
      if (p.name() != def.name()) continue;
      table.placement = p;
      found = true;
    }
    if (!found || table.placement.slices_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the run's placement does not place embedding table '", def.name(),
          "'"));
    }
    std::set<int> tasks;
    for (const auto& slice : table.placement.slices()) {
      if (slice.ps_task() < 0 || slice.ps_task() >= ps->num_ps()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "embedding table '", def.name(), "' is placed on ps task ",
            slice.ps_task(), " of ", ps->num_ps()));
      }
      tasks.insert(slice.ps_task());
    }
    table.tasks.assign(tasks.begin(), tasks.end());
    tables.push_back(std::move(table));
  }
  return std::unique_ptr<SparseTables>(
      new SparseTables(ps, sync, std::move(tables)));
}

SparseTables::SparseTables(ps::PsClusterClient* ps, bool sync,
                           std::vector<Table> tables)
    : ps_(ps), sync_(sync), tables_(std::move(tables)) {}

bool SparseTables::Holds(const std::string& name) const {
  for (const Table& table : tables_) {
    if (table.name == name) return true;
  }
  return false;
}

void SparseTables::Clear() {
  for (Table& table : tables_) {
    table.seen.clear();
    if (table.remap != nullptr) table.remap->Clear();
    table.ids.clear();
    table.mirror_rows.clear();
    table.versions.clear();
  }
}

int64_t SparseTables::num_touched() const {
  int64_t n = 0;
  for (const Table& table : tables_) {
    n += table.remap != nullptr ? table.remap->size() : table.seen.size();
  }
  return n;
}

int64_t SparseTables::MirrorRows(const std::string& name) const {
  for (const Table& table : tables_) {
    if (table.name == name) return table.rows;
  }
  return 0;
}

absl::Status SparseTables::Touch(const Tensor& features,
                                 absl::Span<const int64_t> examples) {
  return TouchImpl(features, nullptr, examples, nullptr);
}

absl::Status SparseTables::TouchAndRemap(Tensor* features,
                                         absl::Span<const int64_t> examples,
                                         const Tensor* wide_ids) {
  return TouchImpl(*features, features, examples, wide_ids);
}

absl::Status SparseTables::TouchImpl(const Tensor& features, Tensor* writable,
                                     absl::Span<const int64_t> examples,
                                     const Tensor* wide_ids) {
  const int64_t batch = static_cast<int64_t>(examples.size());
  if (tables_.empty() || batch == 0) return absl::OkStatus();
  const int64_t row = features.num_elements() / batch;
  if (row * batch != features.num_elements() ||
      (features.dtype() != DT_INT32 && features.dtype() != DT_FLOAT)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a batch of ", batch, " examples with ", features.num_elements(), " ",
        DataTypeName(features.dtype()), " features"));
  }
  if (wide_ids != nullptr &&
      (wide_ids->dtype() != DT_INT64 ||
       wide_ids->num_elements() != features.num_elements())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch's 64-bit ids are ", wide_ids->num_elements(),
                     " ", DataTypeName(wide_ids->dtype()), " values for ",
                     features.num_elements(), " features"));
  }
  // The id of feature i of the batch (an int32, or an exact float).
  const int32_t* const int_ids =
      features.dtype() == DT_INT32 ? features.data<int32_t>() : nullptr;
  const float* const float_ids =
      features.dtype() == DT_FLOAT ? features.data<float>() : nullptr;
  const auto id = [int_ids, float_ids](int64_t i) -> int64_t {
    return int_ids != nullptr ? int_ids[i] : static_cast<int64_t>(float_ids[i]);
  };
  const int64_t* const wide =
      wide_ids != nullptr ? wide_ids->data<int64_t>() : nullptr;
  // Checked first, so that a refused batch adds nothing.
  for (const Table& table : tables_) {
    if (table.remap != nullptr) {
      if (writable == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("growing embedding table '", table.name,
                         "' needs its ids remapped (TouchAndRemap)"));
      }
      continue;
    }
    for (int64_t e = 0; e < batch; ++e) {
      for (int64_t f = table.begin; f < table.begin + table.count; ++f) {
        const int64_t value = id(e * row + f);
        if (value < 0 || value >= table.rows) {
          return absl::InvalidArgumentError(
              absl::StrCat("example ", examples[e], ": id ", value,
                           " (feature ", f, ") is outside [0, ", table.rows,
                           ") of embedding table '", table.name, "'"));
        }
      }
    }
  }
  // Where the local rows go: the features, rewritten in place.
  int32_t* const int_rows = writable != nullptr && int_ids != nullptr
                                ? writable->data<int32_t>()
                                : nullptr;
  float* const float_rows = writable != nullptr && float_ids != nullptr
                                ? writable->data<float>()
                                : nullptr;
  for (Table& table : tables_) {
    if (table.remap != nullptr) {
      if (table.count == 0) continue;  // no ids, and no stride to look ahead
      const auto key_at = [&](int64_t i) {
        return TableKey(wide != nullptr ? wide[i] : id(i));
      };
      // The feature kPrefetchDistance ids ahead, whose slot is prefetched.
      constexpr int64_t kPrefetchDistance = 16;
      int64_t ahead_e = kPrefetchDistance / table.count;
      int64_t ahead_f = table.begin + kPrefetchDistance % table.count;
      for (int64_t e = 0; e < batch; ++e) {
        for (int64_t f = table.begin; f < table.begin + table.count; ++f) {
          if (ahead_e < batch) {
            table.remap->Prefetch(key_at(ahead_e * row + ahead_f));
            if (++ahead_f == table.begin + table.count) {
              ahead_f = table.begin;
              ++ahead_e;
            }
          }
          const int64_t i = e * row + f;
          const int64_t key = key_at(i);
          const int64_t before = table.remap->size();
          absl::StatusOr<int64_t> local = table.remap->Insert(key);
          if (!local.ok()) {
            return absl::Status(
                local.status().code(),
                absl::StrCat("example ", examples[e], ": embedding table '",
                             table.name, "': ", local.status().message()));
          }
          if (int_rows != nullptr) {
            int_rows[i] = static_cast<int32_t>(*local);
          } else {
            float_rows[i] = static_cast<float>(*local);
          }
          if (table.remap->size() == before) continue;
          PSTRAIN_ASSIGN_OR_RETURN(const int slice,
                                   SliceForRow(table.placement, key));
          const int task = table.placement.slices(slice).ps_task();
          table.ids[task].push_back(key);
          table.mirror_rows[task].push_back(*local);
        }
      }
      continue;
    }
    for (int64_t e = 0; e < batch; ++e) {
      for (int64_t f = table.begin; f < table.begin + table.count; ++f) {
        const int64_t value = id(e * row + f);
        if (!table.seen.insert(value).second) continue;
        PSTRAIN_ASSIGN_OR_RETURN(const int slice,
                                 SliceForRow(table.placement, value));
        const int task = table.placement.slices(slice).ps_task();
        table.ids[task].push_back(value);
        table.mirror_rows[task].push_back(value);
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The mirror or gradient of `name`: float32 [rows, width], else
// INVALID_ARGUMENT.
absl::StatusOr<Tensor*> TableTensor(const std::map<std::string, Tensor*>& map,
                                    const std::string& name, int64_t rows,
                                    int64_t width, const char* what) {
  auto it = map.find(name);
  const std::vector<int64_t> shape = {rows, width};
  if (it == map.end() || it->second == nullptr ||
      it->second->dtype() != DT_FLOAT || it->second->shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no float32 ", ShapeString(shape), " ", what, " of embedding table '",
        name, "'"));
  }
  return it->second;
}

}  // namespace

absl::Status SparseTables::Pull(int64_t min_version,
                                const std::map<std::string, Tensor*>& mirrors) {
  std::vector<Tensor*> out(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    const Table& table = tables_[t];
    PSTRAIN_ASSIGN_OR_RETURN(out[t], TableTensor(mirrors, table.name,
                                                 table.rows, table.width,
                                                 "mirror"));
  }
  std::vector<Call> calls;
  std::vector<PullSparseRequest> requests;
  for (size_t t = 0; t < tables_.size(); ++t) {
    Table& table = tables_[t];
    for (int task : table.tasks) {
      const std::vector<int64_t>& ids = table.ids[task];
      table.mirror_rows[task];
      table.versions[task] = 0;
      // Sync: every piece, to wait for the step there too.
      if (ids.empty() && !sync_) continue;
      calls.push_back({t, task});
      requests.push_back(
          ps_->client(task)->NewPullSparse(table.name, ids, min_version));
    }
  }
  std::vector<absl::StatusOr<PullSparseResponse>> results(calls.size());
  RunEveryCall(
      calls,
      [&](size_t i, grpc::CompletionQueue* cq) {
        return ps_->client(calls[i].task)
            ->StartPullSparse(requests[i], cq, &results[i]);
      },
      [&](size_t i) {
        results[i] = ps_->client(calls[i].task)->PullSparse(requests[i]);
      },
      [&](size_t i) { return results[i].status(); });
  for (size_t i = 0; i < calls.size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(results[i].status());
    Table& table = tables_[calls[i].table];
    const int task = calls[i].task;
    const PullSparseResponse& response = *results[i];
    ps_->client(task)->CountReceived(response);
    // A row per id asked for, in order.
    const std::vector<int64_t>& rows = table.mirror_rows[task];
    const int asked = requests[i].ids_size();
    const std::string& values = response.values().content();
    if (static_cast<int64_t>(values.size()) !=
        int64_t{asked} * table.width * 4) {
      return absl::InternalError(absl::StrCat(
          "ps ", task, " sent ", values.size(), " bytes of '", table.name,
          "' rows for ", asked, " ids of width ", table.width));
    }
    float* mirror = out[calls[i].table]->flat<float>().data();
    for (int r = 0; r < asked; ++r) {
      std::memcpy(mirror + rows[r] * table.width,
                  values.data() + r * table.width * 4, table.width * 4);
    }
    table.versions[task] = response.version();
  }
  return absl::OkStatus();
}

absl::Status SparseTables::Push(
    int64_t step, int64_t batch_size,
    const std::map<std::string, Tensor*>& gradients) {
  std::vector<const Tensor*> in(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    const Table& table = tables_[t];
    PSTRAIN_ASSIGN_OR_RETURN(in[t], TableTensor(gradients, table.name,
                                                table.rows, table.width,
                                                "gradient"));
  }
  std::vector<Call> calls;
  std::vector<PushSparseRequest> requests;
  for (size_t t = 0; t < tables_.size(); ++t) {
    const Table& table = tables_[t];
    for (int task : table.tasks) {
      auto ids = table.ids.find(task);
      if (ids == table.ids.end()) continue;
      if (ids->second.empty() && !sync_) continue;
      auto version = table.versions.find(task);
      if (!sync_ && version == table.versions.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pushing rows of '", table.name, "' to ps ", task,
            " that were not pulled"));
      }
      const float* g = in[t]->flat<float>().data();
      const std::vector<int64_t>& local = table.mirror_rows.at(task);
      rows_.resize(ids->second.size() * table.width);
      for (size_t i = 0; i < ids->second.size(); ++i) {
        std::memcpy(rows_.data() + i * table.width, g + local[i] * table.width,
                    table.width * 4);
      }
      calls.push_back({t, task});
      requests.push_back(ps_->client(task)->NewPushSparse(
          table.name, ids->second, rows_, table.width,
          sync_ ? step : version->second, batch_size));
    }
  }
  std::vector<absl::StatusOr<PushSparseResponse>> results(calls.size());
  RunEveryCall(
      calls,
      [&](size_t i, grpc::CompletionQueue* cq) {
        return ps_->client(calls[i].task)
            ->StartPushSparse(requests[i], cq, &results[i]);
      },
      // The same request id: the ps applies the push once.
      [&](size_t i) {
        results[i] = ps_->client(calls[i].task)->PushSparse(requests[i]);
      },
      [&](size_t i) { return results[i].status(); });
  for (size_t i = 0; i < calls.size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(results[i].status());
    ps_->client(calls[i].task)->CountReceived(*results[i]);
  }
  return absl::OkStatus();
}

void SparseTables::RunEveryCall(
    const std::vector<Call>& calls,
    const std::function<
        std::unique_ptr<ps::DenseCall>(size_t, grpc::CompletionQueue*)>& start,
    const std::function<void(size_t)>& again,
    const std::function<absl::Status(size_t)>& status) {
  const size_t n = calls.size();
  if (n == 0) return;
  {
    ps::CallQueue cq;
    std::vector<std::unique_ptr<ps::DenseCall>> owned;
    std::vector<ps::DenseCall*> started;
    for (size_t i = 0; i < n; ++i) {
      owned.push_back(start(i, cq.get()));
      started.push_back(owned.back().get());
    }
    ps::RunCalls(started, cq.get());
  }
  for (size_t i = 0; i < n; ++i) {
    if (!absl::IsUnavailable(status(i))) continue;
    // Tried again as one client's call is (its first attempt is already
    // a retry).
    const RetryOptions& retry = ps_->client(calls[i].task)->options().retry;
    if (retry.on_retry) retry.on_retry();
    again(i);
  }
}

}  // namespace worker
}  // namespace pstrain
