#include "worker/sparse_tables.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
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
    : ps_(ps), sync_(sync), tables_(std::move(tables)) {
  std::set<int> tasks;
  for (const Table& table : tables_) {
    tasks.insert(table.tasks.begin(), table.tasks.end());
  }
  tasks_.assign(tasks.begin(), tasks.end());
  if (!tasks_.empty()) {
    pool_ = std::make_unique<ThreadPool>(static_cast<int>(tasks_.size()));
  }
}

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

int64_t SparseTables::MirrorRow(const Table& table, int64_t id) {
  if (table.remap != nullptr) return table.remap->Find(id);
  return table.seen.contains(id) ? id : -1;
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
  const auto id = [&features](int64_t i) -> int64_t {
    return features.dtype() == DT_INT32
               ? features.data<int32_t>()[i]
               : static_cast<int64_t>(features.data<float>()[i]);
  };
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
  for (Table& table : tables_) {
    if (table.remap != nullptr) {
      for (int64_t e = 0; e < batch; ++e) {
        for (int64_t f = table.begin; f < table.begin + table.count; ++f) {
          const int64_t i = e * row + f;
          const int64_t key = TableKey(
              wide_ids != nullptr ? wide_ids->data<int64_t>()[i] : id(i));
          const int64_t before = table.remap->size();
          absl::StatusOr<int64_t> local = table.remap->Insert(key);
          if (!local.ok()) {
            return absl::Status(
                local.status().code(),
                absl::StrCat("example ", examples[e], ": embedding table '",
                             table.name, "': ", local.status().message()));
          }
          if (writable->dtype() == DT_INT32) {
            writable->data<int32_t>()[i] = static_cast<int32_t>(*local);
          } else {
            writable->data<float>()[i] = static_cast<float>(*local);
          }
          if (table.remap->size() == before) continue;
          PSTRAIN_ASSIGN_OR_RETURN(const int slice,
                                   SliceForRow(table.placement, key));
          table.ids[table.placement.slices(slice).ps_task()].push_back(key);
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
        table.ids[table.placement.slices(slice).ps_task()].push_back(value);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTables::ForEachTask(
    const std::function<absl::Status(int)>& fn) {
  if (tasks_.empty()) return absl::OkStatus();
  std::vector<absl::Status> results(tasks_.size());
  absl::BlockingCounter done(static_cast<int>(tasks_.size()));
  for (size_t i = 0; i < tasks_.size(); ++i) {
    pool_->Schedule([&, i] {
      results[i] = fn(tasks_[i]);
      done.DecrementCount();
    });
  }
  done.Wait();
  for (const absl::Status& status : results) {
    if (!status.ok()) return status;
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
  // Each task's job writes only its own versions entry and the rows of its
  // own ids: the maps are filled here, before the threads start.
  for (Table& table : tables_) {
    for (int task : table.tasks) {
      table.ids[task];
      table.versions[task] = 0;
    }
  }
  return ForEachTask([&](int task) -> absl::Status {
    for (size_t t = 0; t < tables_.size(); ++t) {
      Table& table = tables_[t];
      auto ids = table.ids.find(task);
      if (ids == table.ids.end()) continue;  // No piece on this task.
      // Sync: every piece, to wait for the step there too.
      if (ids->second.empty() && !sync_) continue;
      PSTRAIN_ASSIGN_OR_RETURN(
          PullSparseResponse response,
          ps_->client(task)->PullSparse(table.name, ids->second, min_version));
      const std::string& values = response.values().content();
      if (response.ids_size() != static_cast<int>(ids->second.size()) ||
          static_cast<int64_t>(values.size()) !=
              response.ids_size() * table.width * 4) {
        return absl::InternalError(absl::StrCat(
            "ps ", task, " sent ", response.ids_size(), " rows in ",
            values.size(), " bytes of '", table.name, "' for ",
            ids->second.size(), " distinct ids"));
      }
      float* mirror = out[t]->flat<float>().data();
      for (int i = 0; i < response.ids_size(); ++i) {
        const int64_t id = response.ids(i);
        const int64_t local = MirrorRow(table, id);
        if (local < 0 || local >= table.rows) {
          return absl::InternalError(absl::StrCat(
              "ps ", task, " sent id ", id, " of '", table.name,
              "', which was not asked for"));
        }
        std::memcpy(mirror + local * table.width,
                    values.data() + i * table.width * 4, table.width * 4);
      }
      table.versions.find(task)->second = response.version();
    }
    return absl::OkStatus();
  });
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
  return ForEachTask([&](int task) -> absl::Status {
    std::vector<float> rows;
    for (size_t t = 0; t < tables_.size(); ++t) {
      const Table& table = tables_[t];
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
      rows.resize(ids->second.size() * table.width);
      for (size_t i = 0; i < ids->second.size(); ++i) {
        std::memcpy(rows.data() + i * table.width,
                    g + MirrorRow(table, ids->second[i]) * table.width,
                    table.width * 4);
      }
      PSTRAIN_RETURN_IF_ERROR(
          ps_->client(task)
              ->PushSparse(table.name, ids->second, rows, table.width,
                           sync_ ? step : version->second, batch_size)
              .status());
    }
    return absl::OkStatus();
  });
}

}  // namespace worker
}  // namespace pstrain
