#include "chief/checkpoint_rows.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/dynamic_embeddings.h"
#include "ps/embedding_table.h"

namespace pstrain {
namespace chief {

absl::StatusOr<CheckpointRows> CheckpointRows::Create(
    const ReadCheckpoint& checkpoint) {
  std::map<std::string, const WholeVariable*> by_name;
  for (const WholeVariable& v : checkpoint.variables) by_name[v.name] = &v;
  CheckpointRows result;
  for (const VariableDef& def : checkpoint.index.config().variables()) {
    if (!worker::IsGrowingTable(def)) continue;
    auto rows = by_name.find(def.name());
    auto ids = by_name.find(def.name() + "/ids");
    if (rows == by_name.end() || ids == by_name.end()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint of step ", checkpoint.index.step(), ": growing table '",
          def.name(), "' has no rows or no ids"));
    }
    Table table;
    table.def = def;
    table.width = def.shape().dims(1);
    const int64_t n = static_cast<int64_t>(ids->second->data.size() / 8);
    if (ids->second->data.size() % 8 != 0 ||
        rows->second->data.size() !=
            static_cast<size_t>(n * table.width * sizeof(float))) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint of step ", checkpoint.index.step(), ": growing table '",
          def.name(), "' holds ", rows->second->data.size(),
          " bytes of rows for ", ids->second->data.size(),
          " bytes of ids (width ", table.width, ")"));
    }
    table.rows = rows->second->data.data();
    table.index.reserve(n);
    for (int64_t r = 0; r < n; ++r) {
      int64_t id = 0;
      std::memcpy(&id, ids->second->data.data() + r * 8, 8);
      table.index.emplace(id, r);
    }
    result.tables_.emplace(def.name(), std::move(table));
  }
  return result;
}

absl::Status CheckpointRows::Pull(const std::string& table,
                                  absl::Span<const int64_t> ids,
                                  float* out) const {
  auto it = tables_.find(table);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "'", table, "' is not a growing embedding table of the checkpoint"));
  }
  const Table& t = it->second;
  const size_t row_bytes = t.width * sizeof(float);
  for (size_t i = 0; i < ids.size(); ++i) {
    float* row = out + i * t.width;
    auto found = t.index.find(ids[i]);
    if (found != t.index.end()) {
      std::memcpy(row, t.rows + found->second * row_bytes, row_bytes);
    } else {
      ps::EmbeddingTable::FillAbsentRow(t.def, ids[i], row);
    }
  }
  return absl::OkStatus();
}

int64_t CheckpointRows::num_rows(const std::string& table) const {
  auto it = tables_.find(table);
  return it == tables_.end() ? 0
                             : static_cast<int64_t>(it->second.index.size());
}

}  // namespace chief
}  // namespace pstrain
