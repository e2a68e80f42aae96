#include "compute/loss_config.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace {

constexpr char kLossNames[] =
    "sparse_categorical_crossentropy, categorical_crossentropy, "
    "binary_crossentropy, mse, mae or huber";

bool IsCrossEntropy(LossConfig::Kind kind) {
  return kind == LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY ||
         kind == LossConfig::CATEGORICAL_CROSSENTROPY ||
         kind == LossConfig::BINARY_CROSSENTROPY;
}

bool IsCrossEntropy(LossKind kind) {
  return kind == LossKind::kSparseCrossEntropy ||
         kind == LossKind::kCategoricalCrossEntropy ||
         kind == LossKind::kBinaryCrossEntropy;
}

// The output's units per example; -1 when it is not one vector per example.
int64_t OutputUnits(const ModelSpec& spec) {
  return spec.output_shape.size() == 1 ? spec.output_shape[0] : -1;
}

// The model's output layer, or null for a model of several outputs.
const LayerSpec* OutputLayer(const ModelSpec& spec) {
  if (spec.outputs.size() != 1 || spec.outputs[0] < 0 ||
      spec.outputs[0] >= static_cast<int>(spec.layers.size())) {
    return nullptr;
  }
  return &spec.layers[spec.outputs[0]];
}

absl::string_view ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kLinear:
      return "linear";
    case Activation::kRelu:
    case Activation::kKerasRelu:
      return "relu";
    case Activation::kSoftmax:
      return "softmax";
    case Activation::kLogSoftmax:
      return "log_softmax";
    case Activation::kGelu:
    case Activation::kGeluTanh:
      return "gelu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kHardSigmoid:
      return "hard_sigmoid";
    case Activation::kTanh:
      return "tanh";
    case Activation::kSilu:
      return "silu";
    case Activation::kElu:
      return "elu";
    case Activation::kSelu:
      return "selu";
    case Activation::kSoftplus:
      return "softplus";
  }
  return "unknown";
}

}  // namespace

absl::string_view LossName(LossConfig::Kind kind) {
  switch (kind) {
    case LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY:
    case LossConfig::KIND_UNSPECIFIED:
      return "sparse_categorical_crossentropy";
    case LossConfig::CATEGORICAL_CROSSENTROPY:
      return "categorical_crossentropy";
    case LossConfig::BINARY_CROSSENTROPY:
      return "binary_crossentropy";
    case LossConfig::MEAN_SQUARED_ERROR:
      return "mse";
    case LossConfig::MEAN_ABSOLUTE_ERROR:
      return "mae";
    case LossConfig::HUBER:
      return "huber";
    default:
      return "unknown loss";
  }
}

absl::StatusOr<LossConfig::Kind> ParseLossName(absl::string_view name) {
  if (name == "sparse_categorical_crossentropy") {
    return LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY;
  }
  if (name == "categorical_crossentropy") {
    return LossConfig::CATEGORICAL_CROSSENTROPY;
  }
  if (name == "binary_crossentropy") return LossConfig::BINARY_CROSSENTROPY;
  if (name == "mse" || name == "mean_squared_error") {
    return LossConfig::MEAN_SQUARED_ERROR;
  }
  if (name == "mae" || name == "mean_absolute_error") {
    return LossConfig::MEAN_ABSOLUTE_ERROR;
  }
  if (name == "huber") return LossConfig::HUBER;
  return absl::InvalidArgumentError(
      absl::StrCat("--loss: \"", name, "\" is not ", kLossNames));
}

absl::Status CheckLossFlags(absl::string_view loss, bool from_logits) {
  if (loss.empty()) return absl::OkStatus();
  absl::StatusOr<LossConfig::Kind> kind = ParseLossName(loss);
  if (!kind.ok()) return kind.status();
  if (from_logits && !IsCrossEntropy(*kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--from_logits: applies to the cross-entropy losses only, "
                     "not to --loss=",
                     loss));
  }
  return absl::OkStatus();
}

OutputActivation FinalActivation(const ModelSpec& spec) {
  const LayerSpec* layer = OutputLayer(spec);
  if (layer == nullptr) return OutputActivation::kOther;
  for (const LayerSpec& other : spec.layers) {
    for (const TensorRef& ref : other.inputs) {
      if (!ref.model_input && ref.index == spec.outputs[0]) {
        return OutputActivation::kOther;
      }
    }
  }
  if (layer->activation == Activation::kSoftmax &&
      layer->activation_params.axis + 1 ==
          static_cast<int>(layer->output_shape.size())) {
    return OutputActivation::kSoftmax;
  }
  if (layer->activation == Activation::kSigmoid) {
    return OutputActivation::kSigmoid;
  }
  return OutputActivation::kOther;
}

absl::StatusOr<LossConfig> ChooseLoss(const ModelSpec& spec,
                                      absl::string_view model_name,
                                      absl::string_view loss,
                                      bool from_logits) {
  if (absl::Status flags = CheckLossFlags(loss, from_logits); !flags.ok()) {
    return flags;
  }
  const int64_t units = OutputUnits(spec);
  if (units <= 0) {
    return absl::InvalidArgumentError(
        "--loss: the model's output must be one vector per example (end the "
        "model with a Dense layer)");
  }
  LossConfig config;
  config.set_from_logits(from_logits);
  const OutputActivation final_activation = FinalActivation(spec);
  if (!loss.empty()) {
    config.set_kind(*ParseLossName(loss));
  } else if (model_name == "cnn") {
    // Ends in Dense(10) logits; seed 002's tutorial compiles it with
    // SparseCategoricalCrossentropy(from_logits=True).
    config.set_kind(LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
    config.set_from_logits(true);
  } else if (final_activation == OutputActivation::kSoftmax) {
    config.set_kind(LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
  } else if (final_activation == OutputActivation::kSigmoid && units == 1) {
    config.set_kind(LossConfig::BINARY_CROSSENTROPY);
  } else {
    const LayerSpec* layer = OutputLayer(spec);
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss: not given, and the model's output layer",
        layer == nullptr ? "" : absl::StrCat(" '", layer->name, "' ("),
        layer == nullptr ? ""
                         : absl::StrCat(ActivationName(layer->activation), ", ",
                                        units, " units)"),
        " is neither a softmax nor a single sigmoid unit, so the loss cannot "
        "be told from it: pass --loss (",
        kLossNames, ") and --from_logits as the model was compiled"));
  }
  const absl::string_view name = LossName(config.kind());
  if ((config.kind() == LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY ||
       config.kind() == LossConfig::CATEGORICAL_CROSSENTROPY) &&
      units < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss=", name,
        ": the model's output has 1 unit; a cross-entropy over classes needs "
        "one unit per class (for one sigmoid unit: "
        "--loss=binary_crossentropy)"));
  }
  if (config.kind() == LossConfig::BINARY_CROSSENTROPY && units != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss=binary_crossentropy: the model's output has ", units,
        " units; binary cross-entropy takes one output unit per example and "
        "labels 0 or 1 (for one unit per class: "
        "--loss=sparse_categorical_crossentropy)"));
  }
  return config;
}

absl::Status CheckLabelsFitLoss(const LossConfig& loss, const ModelSpec& spec,
                                absl::Span<const int32_t> labels,
                                absl::string_view what) {
  const int64_t units = OutputUnits(spec);
  const absl::string_view name = LossName(loss.kind());
  const bool binary = loss.kind() == LossConfig::BINARY_CROSSENTROPY;
  const bool value_targets = !IsCrossEntropy(loss.kind()) &&
                             loss.kind() != LossConfig::KIND_UNSPECIFIED &&
                             units == 1;
  if (value_targets) return absl::OkStatus();
  for (size_t i = 0; i < labels.size(); ++i) {
    const int32_t label = labels[i];
    if (binary && label != 0 && label != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--loss=", name, ": label ", label, " of example ", i, " of ", what,
          " is not 0 or 1 (binary cross-entropy takes labels 0 and 1)"));
    }
    if (!binary && (label < 0 || label >= units)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--loss=", name, ": label ", label, " of example ", i,
                       " of ", what, " is not one of the model's ", units,
                       " output classes [0, ", units, ")"));
    }
  }
  return absl::OkStatus();
}

std::string DescribeLoss(const ModelSpec& spec, const LossConfig& loss) {
  const BackendLoss backend = ToBackendLoss(loss);
  const LossPlan plan = PlanLoss(spec, backend.kind, backend.input);
  const bool binary = HasBinaryMetrics(loss);
  const bool one_unit = OutputUnits(spec) == 1;
  std::string text(LossName(loss.kind()));
  if (IsCrossEntropy(backend.kind)) {
    const char* activation = FinalActivation(spec) == OutputActivation::kSigmoid
                                 ? "sigmoid"
                                 : "softmax";
    if (plan.strip_final_activation) {
      absl::StrAppend(
          &text, " (from_logits=", loss.from_logits() ? "true" : "false",
          ": computed from the logits behind the final ", activation,
          ", exactly, as tf.keras does",
          loss.from_logits()
              ? "; tf.keras warns that such an output does not represent "
                "logits, and reads behind it all the same)"
              : ")");
    } else if (loss.from_logits()) {
      absl::StrAppend(&text,
                      " (from_logits=true: the model's output is the "
                      "logits)");
    } else {
      absl::StrAppend(&text,
                      " (from_logits=false: the output is taken for "
                      "probabilities, clipped to [1e-7, 1 - 1e-7] as "
                      "Keras does)");
    }
  } else {
    if (backend.kind == LossKind::kHuber) absl::StrAppend(&text, " (delta 1)");
    absl::StrAppend(&text, one_unit ? " against the label itself"
                                    : " against the one-hot rows of the label");
  }
  absl::StrAppend(&text, "; metrics: ",
                  binary ? "binary accuracy (probability > 0.5) and AUC "
                           "(exact, over the whole test set)"
                  : one_unit && !IsCrossEntropy(backend.kind)
                      ? "accuracy (the output rounded)"
                      : "accuracy");
  return text;
}

bool HasBinaryMetrics(const LossConfig& loss) {
  return loss.kind() == LossConfig::BINARY_CROSSENTROPY;
}

BackendLoss ToBackendLoss(const LossConfig& loss) {
  BackendLoss backend;
  backend.input =
      loss.from_logits() ? LossInput::kLogits : LossInput::kProbabilities;
  switch (loss.kind()) {
    case LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY:
      backend.kind = LossKind::kSparseCrossEntropy;
      break;
    case LossConfig::CATEGORICAL_CROSSENTROPY:
      backend.kind = LossKind::kCategoricalCrossEntropy;
      break;
    case LossConfig::BINARY_CROSSENTROPY:
      backend.kind = LossKind::kBinaryCrossEntropy;
      break;
    case LossConfig::MEAN_SQUARED_ERROR:
      backend.kind = LossKind::kMeanSquaredError;
      break;
    case LossConfig::MEAN_ABSOLUTE_ERROR:
      backend.kind = LossKind::kMeanAbsoluteError;
      break;
    case LossConfig::HUBER:
      backend.kind = LossKind::kHuber;
      break;
    default:  // KIND_UNSPECIFIED
      backend.kind = LossKind::kSparseCrossEntropy;
      backend.input = LossInput::kLogits;
      break;
  }
  return backend;
}

LossPlan PlanLoss(const ModelSpec& spec, LossKind kind, LossInput input) {
  LossPlan plan;
  if (!IsCrossEntropy(kind)) return plan;
  // Keras's softmax and sigmoid keep their logits on their output, and
  // every cross-entropy of tf.keras reads them there (_get_logits).
  plan.strip_final_activation =
      FinalActivation(spec) != OutputActivation::kOther;
  plan.output_is_logits =
      plan.strip_final_activation || input == LossInput::kLogits;
  return plan;
}

}  // namespace worker
}  // namespace pstrain
