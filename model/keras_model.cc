#include "model/keras_model.h"

#include <algorithm>
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
#include "common/read_file.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/keras_fields.h"
#include "model/keras_functional.h"
#include "model/keras_sequential.h"
#include "model/shipped/shipped_models.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

// Reads `json`, the whole model, with `prefix` starting errors.
absl::StatusOr<ModelSpec> ParseModel(absl::string_view json,
                                     const std::string& prefix, uint64_t seed) {
  const absl::StatusOr<Json> parsed = ParseJson(json);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "invalid JSON: ", parsed.status().message()));
  }
  const Json& root = *parsed;
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "expected a JSON object (a Keras model), ", JsonGot(root)));
  }
  const KerasFields top(root, prefix);
  PSTRAIN_ASSIGN_OR_RETURN(const std::string class_name,
                           top.String("class_name", std::nullopt));
  const bool sequential = class_name == "Sequential";
  // tf.keras 2.x and TensorFlow.js write "Model" for a Functional model.
  if (!sequential && class_name != "Functional" && class_name != "Model") {
    return top.Unsupported("class_name", Json(class_name),
                           "expected Sequential, Functional or Model");
  }
  PSTRAIN_RETURN_IF_ERROR(top.ExpectKerasClass(class_name));
  const Json* config = top.Find("config");
  if (config == nullptr) return top.FieldError("config", "missing");
  if (!config->is_object()) {
    return top.FieldError(
        "config", absl::StrCat("expected an object, ", JsonGot(*config)));
  }
  const KerasFields model_fields(*config, prefix, "config.");
  ParseContext parse;
  parse.seed = seed;
  // tf.keras 2.x writes its version ("2.15.0"), TensorFlow.js "tfjs-layers
  // 4.22.0"; Keras 3 writes none.
  if (const Json* version = top.Find("keras_version");
      version != nullptr && version->is_string()) {
    parse.keras2 = version->get<std::string>().rfind("3.", 0) != 0;
  }
  ModelSpec model;
  PSTRAIN_ASSIGN_OR_RETURN(
      model.name,
      model_fields.String("name", sequential ? "sequential" : "functional"));
  PSTRAIN_ASSIGN_OR_RETURN(const bool trainable,
                           model_fields.Bool("trainable", true));
  if (!trainable) {
    return model_fields.Unsupported("trainable", Json(false),
                                    "expected true: pstrain trains it all");
  }
  if (sequential) {
    SequentialContext context;
    context.prefix = prefix;
    context.parse = parse;
    PSTRAIN_ASSIGN_OR_RETURN(const int last,
                             AppendSequential(model_fields, context, &model));
    model.outputs = {last};
  } else {
    PSTRAIN_RETURN_IF_ERROR(
        ParseFunctional(model_fields, prefix, parse, &model));
  }
  model.input_shape = model.inputs.front().shape;
  model.input_dtype = model.inputs.front().dtype;
  model.output_shape = model.layers[model.outputs.front()].output_shape;
  return model;
}

// A model's JSON holds no weights: kilobytes, a few megabytes for the
// largest; a file past this is another kind of file.
constexpr size_t kMaxModelFileBytes = 64 << 20;

absl::StatusOr<std::string> ReadModelFile(const std::string& path,
                                          absl::string_view prefix) {
  absl::StatusOr<std::string> text = ReadFileAtMost(path, kMaxModelFileBytes);
  if (text.ok()) return text;
  if (!absl::IsNotFound(text.status())) {  // there, but not readable as one
    return absl::Status(text.status().code(),
                        absl::StrCat(prefix, text.status().message()));
  }
  std::vector<absl::string_view> names;
  for (const ShippedModel& shipped : ShippedModels()) {
    names.push_back(shipped.name);
  }
  return absl::Status(
      text.status().code(),
      absl::StrCat(prefix, "not a shipped model (", absl::StrJoin(names, ", "),
                   ") and ", text.status().message()));
}

}  // namespace

absl::StatusOr<ModelSpec> ParseKerasModel(absl::string_view json,
                                          uint64_t seed) {
  return ParseModel(json, "model: ", seed);
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
  return ParseModel(text, absl::StrCat("model \"", name_or_path, "\": "), seed);
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
