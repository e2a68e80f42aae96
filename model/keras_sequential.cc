#include "model/keras_sequential.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "model/keras_layers.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

class SequentialParser {
 public:
  SequentialParser(const KerasFields& config, const SequentialContext& context,
                   ModelSpec* model)
      : config_(config), context_(context), model_(model) {
    if (context.input.has_value()) shape_ = context.input_shape;
  }

  absl::StatusOr<int> Parse();

 private:
  absl::Status ParseEntry(int index, const Json& json);
  absl::Status ParseInputLayer(int index, const LayerEntry& entry);
  // Sets shape_ when no earlier layer did: from the layer's own
  // batch_input_shape (tf.keras 2.x) or the model's build_input_shape.
  absl::Status ResolveInputShape(const KerasFields& fields);
  // Makes the whole model's input, named `name`, of `shape`.
  void SetModelInput(std::string name, std::vector<int64_t> shape);

  const KerasFields& config_;
  const SequentialContext& context_;
  ModelSpec* const model_;
  // The output shape of the layers so far; unset until an input shape is
  // known.
  std::optional<std::vector<int64_t>> shape_;
  // Index in model_->layers of its first layer, and of the last one added.
  int first_ = -1;
  int last_ = -1;
  // Index in "layers" of each layer name seen.
  std::map<std::string, int> names_;
};

absl::StatusOr<int> SequentialParser::Parse() {
  const Json* layers = config_.Find("layers");
  if (layers == nullptr) return config_.FieldError("layers", "missing");
  if (!layers->is_array()) {
    return config_.FieldError(
        "layers", absl::StrCat("expected a list, ", JsonGot(*layers)));
  }
  first_ = static_cast<int>(model_->layers.size());
  for (size_t i = 0; i < layers->size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(ParseEntry(static_cast<int>(i), (*layers)[i]));
  }
  if (last_ < 0) {
    return config_.FieldError("layers", "no layers (besides an InputLayer)");
  }
  if (!context_.input.has_value()) {
    InputSpec& input = model_->inputs.front();
    if (model_->layers[first_].kind == LayerKind::kEmbedding) {
      input.dtype = DT_INT32;
    }
  }
  return last_;
}

void SequentialParser::SetModelInput(std::string name,
                                     std::vector<int64_t> shape) {
  InputSpec input;
  input.name = std::move(name);
  input.shape = shape;
  model_->inputs.push_back(std::move(input));
  shape_ = std::move(shape);
}

absl::Status SequentialParser::ParseEntry(int index, const Json& json) {
  PSTRAIN_ASSIGN_OR_RETURN(const LayerEntry entry,
                           ReadLayerEntry(json, context_.prefix, index));
  const KerasFields fields = entry.Fields();
  const auto [seen, inserted] = names_.emplace(entry.name, index);
  if (!inserted) {
    return fields.FieldError(
        "name", absl::StrCat("\"", entry.name, "\" is also the name of layer ",
                             seen->second));
  }
  if (entry.class_name == "InputLayer") return ParseInputLayer(index, entry);

  PSTRAIN_RETURN_IF_ERROR(ResolveInputShape(fields));
  if (entry.class_name == "Embedding" && last_ >= 0) {
    return fields.Error(
        "must be the first layer (the model's inputs are its integer ids)");
  }
  LayerSpec layer;
  layer.name = absl::StrCat(context_.name_prefix, entry.name);
  if (last_ >= 0) {
    layer.inputs = {TensorRef{false, last_}};
  } else if (context_.input.has_value()) {
    layer.inputs = {*context_.input};
  } else {
    layer.inputs = {TensorRef{true, 0}};
  }
  layer.input_shape = *shape_;
  layer.input_shapes = {*shape_};
  PSTRAIN_RETURN_IF_ERROR(
      ParseLayer(entry, context_.parse, &layer, &model_->variables));
  shape_ = layer.output_shape;
  last_ = static_cast<int>(model_->layers.size());
  model_->layers.push_back(std::move(layer));
  return absl::OkStatus();
}

absl::Status SequentialParser::ParseInputLayer(int index,
                                               const LayerEntry& entry) {
  const KerasFields fields = entry.Fields();
  if (index != 0) return fields.Error("must be the first layer");
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                           ParseInputLayerShape(fields));
  if (!context_.input.has_value()) {
    SetModelInput(entry.name, std::move(shape));
  } else if (shape != *shape_) {
    return fields.Error(absl::StrCat(
        "declares the input ", ShapeString(shape), " (per example), but is "
        "called on ", ShapeString(*shape_)));
  }
  return absl::OkStatus();
}

absl::Status SequentialParser::ResolveInputShape(const KerasFields& fields) {
  if (fields.Find("batch_input_shape") != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> declared,
                             ParseBatchShape(fields, "batch_input_shape"));
    if (!shape_.has_value()) {
      SetModelInput("input", std::move(declared));
    } else if (declared != *shape_) {
      return fields.FieldError(
          "batch_input_shape",
          absl::StrCat(ShapeString(declared),
                       " (per example) does not match the input ",
                       ShapeString(*shape_), " the layers before give"));
    }
  }
  if (shape_.has_value()) return absl::OkStatus();
  if (config_.Find("build_input_shape") == nullptr) {
    return fields.Error(
        "no input shape: start the model with an InputLayer "
        "(keras.Input(shape=...)) or give this layer input_shape");
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                           ParseBatchShape(config_, "build_input_shape"));
  SetModelInput("input", std::move(shape));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> AppendSequential(const KerasFields& config,
                                     const SequentialContext& context,
                                     ModelSpec* model) {
  return SequentialParser(config, context, model).Parse();
}

}  // namespace worker
}  // namespace pstrain
