#include "model/dynamic_embeddings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {

bool IsGrowingTable(const VariableDef& def) {
  return def.sparse() && def.shape().dims_size() == 2 &&
         def.shape().dims(0) == 0;
}

absl::Status MakeEmbeddingsDynamic(absl::Span<const std::string> layers,
                                   ModelSpec* spec) {
  for (const std::string& name : layers) {
    bool found = false;
    for (LayerSpec& layer : spec->layers) {
      if (layer.name != name) continue;
      if (layer.kind != LayerKind::kEmbedding || layer.variables.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--dynamic_embeddings: layer '", name, "' is not an Embedding"));
      }
      found = true;
      layer.input_dim = 0;
      for (VariableDef& def : spec->variables) {
        if (def.name() == layer.variables[0])
          def.mutable_shape()->set_dims(0, 0);
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dynamic_embeddings: the model has no layer '", name, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelSpec> LoadRunModel(const TrainingConfig& config) {
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec,
                           ParseKerasModel(config.model_json(), config.seed()));
  const std::vector<std::string> layers(config.dynamic_embeddings().begin(),
                                        config.dynamic_embeddings().end());
  PSTRAIN_RETURN_IF_ERROR(MakeEmbeddingsDynamic(layers, &spec));
  return spec;
}

int64_t IdsPerExample(const ModelSpec& spec, const std::string& table) {
  int64_t most = 0;
  for (const LayerSpec& layer : spec.layers) {
    if (layer.kind != LayerKind::kEmbedding || layer.variables.size() != 1 ||
        layer.variables[0] != table) {
      continue;
    }
    int64_t ids = 1;
    for (const int64_t d : layer.input_shape) ids *= d;
    // A table shared by several Embedding calls: each reads its own input.
    most += ids;
  }
  return most;
}

int64_t LocalTableRows(const ModelSpec& spec, const std::string& table,
                       int64_t batch_rows) {
  return std::max<int64_t>(1, batch_rows * IdsPerExample(spec, table));
}

ModelSpec WithLocalTables(const ModelSpec& spec, int64_t batch_rows) {
  ModelSpec local = spec;
  for (VariableDef& def : local.variables) {
    if (!IsGrowingTable(def)) continue;
    const int64_t rows = LocalTableRows(spec, def.name(), batch_rows);
    def.mutable_shape()->set_dims(0, rows);
    for (LayerSpec& layer : local.layers) {
      if (layer.kind == LayerKind::kEmbedding && layer.variables.size() == 1 &&
          layer.variables[0] == def.name()) {
        layer.input_dim = rows;
      }
    }
  }
  return local;
}

}  // namespace worker
}  // namespace pstrain
