#include "worker/model/keras_model.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/derived_seed.h"
#include "common/json_util.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"
#include "worker/model/keras_fields.h"
#include "worker/model/keras_layers.h"
#include "worker/models/shipped_models.h"

namespace pstrain {
namespace worker {
namespace {

bool HasControlCharacter(absl::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return absl::ascii_iscntrl(c); });
}

using Json = nlohmann::json;

// ---------------------------------------------------------------------------
// The Sequential model: its layers in order, each taking the previous one's
// output shape.

class SequentialParser {
 public:
  SequentialParser(std::string prefix, uint64_t seed)
      : prefix_(std::move(prefix)), seed_(seed) {}

  absl::StatusOr<ModelSpec> Parse(absl::string_view json);

 private:
  absl::Status Error(absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, problem));
  }
  absl::Status ParseLayer(int index, const Json& entry,
                          const KerasFields& model_fields);
  absl::Status ParseInputLayer(int index, const KerasFields& fields);
  // Sets shape_ when no earlier layer did: from the layer's own
  // batch_input_shape (tf.keras 2.x) or the model's build_input_shape.
  absl::Status ResolveInputShape(const KerasFields& fields,
                                 const KerasFields& model_fields);

  const std::string prefix_;
  const uint64_t seed_;
  ModelSpec model_;
  // The output shape of the layers so far; unset until an input shape is
  // known.
  std::optional<std::vector<int64_t>> shape_;
  // Index of each layer name seen.
  std::map<std::string, int> names_;
};

absl::StatusOr<ModelSpec> SequentialParser::Parse(absl::string_view json) {
  const Json root = Json::parse(json.begin(), json.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Error(absl::StrCat("invalid JSON: ", JsonParseError(json)));
  }
  if (!root.is_object()) {
    return Error(absl::StrCat("expected a JSON object (a Keras model), ",
                              JsonGot(root)));
  }
  const KerasFields top(root, prefix_);
  PSTRAIN_ASSIGN_OR_RETURN(const std::string class_name,
                           top.String("class_name", std::nullopt));
  if (class_name != "Sequential") {
    return top.Unsupported("class_name", Json(class_name),
                           "only Sequential models are");
  }
  PSTRAIN_RETURN_IF_ERROR(top.ExpectKerasClass(class_name));
  const Json* config = top.Find("config");
  if (config == nullptr) return top.FieldError("config", "missing");
  if (!config->is_object()) {
    return top.FieldError(
        "config", absl::StrCat("expected an object, ", JsonGot(*config)));
  }
  const KerasFields model_fields(*config, prefix_, "config.");
  PSTRAIN_ASSIGN_OR_RETURN(model_.name,
                           model_fields.String("name", "sequential"));
  PSTRAIN_ASSIGN_OR_RETURN(const bool trainable,
                           model_fields.Bool("trainable", true));
  if (!trainable) {
    return model_fields.Unsupported("trainable", Json(false),
                                    "expected true: pstrain trains it all");
  }
  const Json* layers = model_fields.Find("layers");
  if (layers == nullptr) return model_fields.FieldError("layers", "missing");
  if (!layers->is_array()) {
    return model_fields.FieldError(
        "layers", absl::StrCat("expected a list, ", JsonGot(*layers)));
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(
        ParseLayer(static_cast<int>(i), (*layers)[i], model_fields));
  }
  if (model_.layers.empty()) {
    return model_fields.FieldError("layers",
                                   "no layers (besides an InputLayer)");
  }
  model_.output_shape = model_.layers.back().output_shape;
  model_.input_dtype =
      model_.layers.front().kind == LayerKind::kEmbedding ? DT_INT32 : DT_FLOAT;
  return std::move(model_);
}

absl::Status SequentialParser::ParseLayer(int index, const Json& entry,
                                          const KerasFields& model_fields) {
  const std::string at = absl::StrCat(prefix_, "layer ", index);
  if (!entry.is_object()) {
    return Error(absl::StrCat("layer ", index, ": expected an object, ",
                              JsonGot(entry)));
  }
  const KerasFields entry_fields(entry, absl::StrCat(at, ": "));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string class_name,
                           entry_fields.String("class_name", std::nullopt));
  // Names go into messages, logs and variable paths: one line each.
  if (HasControlCharacter(class_name)) {
    return entry_fields.FieldError("class_name",
                                   "contains a control character");
  }
  const Json* config = entry_fields.Find("config");
  if (config == nullptr) return entry_fields.FieldError("config", "missing");
  if (!config->is_object()) {
    return entry_fields.FieldError(
        "config", absl::StrCat("expected an object, ", JsonGot(*config)));
  }
  const KerasFields unnamed(*config, absl::StrCat(at, " (", class_name, "): "));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string name,
                           unnamed.String("name", std::nullopt));
  if (HasControlCharacter(name)) {
    return unnamed.FieldError("name", "contains a control character");
  }
  const std::string where =
      absl::StrCat(at, " '", name, "' (", class_name, "): ");
  PSTRAIN_RETURN_IF_ERROR(
      KerasFields(entry, where).ExpectKerasClass(class_name));
  const KerasFields fields(*config, where);

  if (name.empty()) return fields.FieldError("name", "is empty");
  if (name.find('/') != std::string::npos) {
    return fields.FieldError(
        "name",
        "contains '/', which separates variable paths (\"dense/kernel\")");
  }
  const auto [seen, inserted] = names_.emplace(name, index);
  if (!inserted) {
    return fields.FieldError(
        "name", absl::StrCat("\"", name, "\" is also the name of layer ",
                             seen->second));
  }
  if (class_name == "InputLayer") return ParseInputLayer(index, fields);

  const LayerParser parse = FindLayerParser(class_name);
  if (parse == nullptr) {
    return Error(
        absl::StrCat("layer ", index, " '", name, "': ", class_name,
                     " is not supported (supported: ", kSupportedLayers, ")"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const bool trainable,
                           fields.Bool("trainable", true));
  if (!trainable) {
    return fields.Unsupported("trainable", Json(false),
                              "expected true: pstrain trains every layer");
  }
  PSTRAIN_RETURN_IF_ERROR(ExpectFloat32(fields));
  PSTRAIN_RETURN_IF_ERROR(ResolveInputShape(fields, model_fields));
  if (class_name == "Embedding" && !model_.layers.empty()) {
    return fields.Error(
        "must be the first layer (the model's inputs are its integer ids)");
  }

  LayerSpec layer;
  layer.name = name;
  layer.input_shape = *shape_;
  PSTRAIN_RETURN_IF_ERROR(parse(fields, seed_, &layer, &model_.variables));
  shape_ = layer.output_shape;
  model_.layers.push_back(std::move(layer));
  return absl::OkStatus();
}

absl::Status SequentialParser::ParseInputLayer(int index,
                                               const KerasFields& fields) {
  if (index != 0) return fields.Error("must be the first layer");
  // Keras 3 writes batch_shape, tf.keras 2.x batch_input_shape.
  const bool keras2 = fields.Find("batch_shape") == nullptr &&
                      fields.Find("batch_input_shape") != nullptr;
  const char* key = keras2 ? "batch_input_shape" : "batch_shape";
  PSTRAIN_ASSIGN_OR_RETURN(model_.input_shape, ParseBatchShape(fields, key));
  shape_ = model_.input_shape;
  return absl::OkStatus();
}

absl::Status SequentialParser::ResolveInputShape(
    const KerasFields& fields, const KerasFields& model_fields) {
  if (fields.Find("batch_input_shape") != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> declared,
                             ParseBatchShape(fields, "batch_input_shape"));
    if (!shape_.has_value()) {
      model_.input_shape = declared;
      shape_ = std::move(declared);
    } else if (declared != *shape_) {
      return fields.FieldError(
          "batch_input_shape",
          absl::StrCat(ShapeString(declared),
                       " (per example) does not match the input ",
                       ShapeString(*shape_), " the layers before give"));
    }
  }
  if (shape_.has_value()) return absl::OkStatus();
  if (model_fields.Find("build_input_shape") == nullptr) {
    return fields.Error(
        "no input shape: start the model with an InputLayer "
        "(keras.Input(shape=...)) or give this layer input_shape");
  }
  PSTRAIN_ASSIGN_OR_RETURN(model_.input_shape,
                           ParseBatchShape(model_fields, "build_input_shape"));
  shape_ = model_.input_shape;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadModelFile(const std::string& path,
                                          absl::string_view prefix) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    std::vector<absl::string_view> names;
    for (const ShippedModel& shipped : ShippedModels()) {
      names.push_back(shipped.name);
    }
    return absl::ErrnoToStatus(
        errno, absl::StrCat(prefix, "not a shipped model (",
                            absl::StrJoin(names, ", "),
                            ") and cannot be opened as a file"));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    text.append(buffer, n);
  }
  const int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    return absl::ErrnoToStatus(error,
                               absl::StrCat(prefix, "cannot read the file"));
  }
  return text;
}

}  // namespace

absl::StatusOr<ModelSpec> ParseKerasModel(absl::string_view json,
                                          uint64_t seed) {
  return SequentialParser("model: ", seed).Parse(json);
}

absl::StatusOr<std::string> LoadModelJson(absl::string_view name_or_path) {
  for (const ShippedModel& shipped : ShippedModels()) {
    if (shipped.name == name_or_path) return std::string(shipped.json);
  }
  return ReadModelFile(std::string(name_or_path),
                       absl::StrCat("model \"", name_or_path, "\": "));
}

absl::StatusOr<ModelSpec> LoadModel(absl::string_view name_or_path,
                                    uint64_t seed) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, LoadModelJson(name_or_path));
  return SequentialParser(absl::StrCat("model \"", name_or_path, "\": "), seed)
      .Parse(text);
}

int64_t ParameterCount(const ModelSpec& model) {
  int64_t count = 0;
  for (const VariableDef& variable : model.variables) {
    int64_t elements = 1;
    for (const int64_t dim : variable.shape().dims()) elements *= dim;
    count += elements;
  }
  return count;
}

}  // namespace worker
}  // namespace pstrain
