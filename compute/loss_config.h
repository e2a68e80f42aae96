// The training loss of a run, from the chief's flags to the backends. Keras's
// model JSON carries no compile settings, so the chief takes the loss as
// flags (--loss, --from_logits) or, without --loss, from the model's output
// layer; it puts the choice in TrainingConfig.loss (proto/training.proto),
// and every worker and the evaluator build their backend from it.
//
//   // The chief, before it starts anything:
//   PSTRAIN_RETURN_IF_ERROR(CheckLossFlags(flag_loss, flag_from_logits));
//   PSTRAIN_ASSIGN_OR_RETURN(
//       LossConfig loss, ChooseLoss(spec, "mlp", flag_loss, flag_from_logits));
//   LogInfo(DescribeLoss(spec, loss));
//   // A worker or the evaluator:
//   const BackendLoss b = ToBackendLoss(config.loss());
//   options.loss = b.kind;
//   options.loss_input = b.input;
//
// Refusals are INVALID_ARGUMENT with one line naming the flag.
#ifndef PSTRAIN_COMPUTE_LOSS_CONFIG_H_
#define PSTRAIN_COMPUTE_LOSS_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compute/backend.h"
#include "model/keras_model.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

// Keras's name of `kind` ("sparse_categorical_crossentropy", "mse", ...).
absl::string_view LossName(LossConfig::Kind kind);

// The --loss values: sparse_categorical_crossentropy,
// categorical_crossentropy, binary_crossentropy, mse (or
// mean_squared_error), mae (or mean_absolute_error), huber. Anything else
// (the empty string too) is INVALID_ARGUMENT listing them.
absl::StatusOr<LossConfig::Kind> ParseLossName(absl::string_view name);

// The checks that need no model: `loss` empty or a --loss value, and
// --from_logits only with a cross-entropy (or no --loss).
absl::Status CheckLossFlags(absl::string_view loss, bool from_logits);

// What ends the model, as the losses see it: the activation of the model's
// output layer (a Dense's activation or an activation layer), when no other
// layer reads that layer.
enum class OutputActivation {
  kSoftmax,  // A softmax over the last axis.
  kSigmoid,
  kOther,  // Linear, any other activation, or a model of several outputs.
};
OutputActivation FinalActivation(const ModelSpec& spec);

// The loss of a run: `loss` (a --loss value) with `from_logits`, or with an
// empty `loss` the model's default: a final softmax gives sparse categorical
// cross-entropy, a single sigmoid unit binary cross-entropy, and the
// shipped model "cnn" (which ends in logits) sparse categorical
// cross-entropy with from_logits=true, as seed 002's tutorial compiles it;
// any other model is refused, asking for --loss. Also refused: a loss the
// output cannot take (a categorical cross-entropy on one unit, a binary one
// on several) or an output that is not one vector per example.
absl::StatusOr<LossConfig> ChooseLoss(const ModelSpec& spec,
                                      absl::string_view model_name,
                                      absl::string_view loss, bool from_logits);

// INVALID_ARGUMENT, naming `what` ("the training data") and the first
// offending example, unless every label fits `loss` on `spec`: 0 or 1 for
// binary cross-entropy; a class of the output, [0, units), for the
// categorical losses and for mse, mae and huber on several units (one unit:
// any label is its target).
absl::Status CheckLabelsFitLoss(const LossConfig& loss, const ModelSpec& spec,
                                absl::Span<const int32_t> labels,
                                absl::string_view what);

// One line saying what is computed, for the chief's log:
// "sparse_categorical_crossentropy (from_logits=false: computed from the
// logits behind the final softmax, exactly, as tf.keras does); metrics:
// accuracy".
std::string DescribeLoss(const ModelSpec& spec, const LossConfig& loss);

// Whether the evaluation reports binary accuracy and AUC (binary
// cross-entropy) rather than accuracy.
bool HasBinaryMetrics(const LossConfig& loss);

// A LossConfig as backends take it. KIND_UNSPECIFIED (a run from before
// losses were chosen) is sparse cross-entropy from logits: the logits behind
// a final softmax, else the output.
struct BackendLoss {
  LossKind kind = LossKind::kSparseCrossEntropy;
  LossInput input = LossInput::kLogits;
};
BackendLoss ToBackendLoss(const LossConfig& loss);

// How a backend computes `kind` read as `input` on `spec`: a cross-entropy
// on a model that ends in a softmax or sigmoid reads the logits behind it
// whatever `input` says, as tf.keras does (backend.h's LossInput).
struct LossPlan {
  // Leave the final softmax (sigmoid) out of the model: the loss reads the
  // logits behind it.
  bool strip_final_activation = false;
  // A cross-entropy reads the (stripped) output as logits; else as
  // probabilities, clipped as Keras does. Meaningless for the other losses.
  bool output_is_logits = false;
};
LossPlan PlanLoss(const ModelSpec& spec, LossKind kind, LossInput input);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_LOSS_CONFIG_H_
