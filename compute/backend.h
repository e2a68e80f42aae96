// A model's forward and backward passes on one kind of device, behind one
// interface: the training loop neither knows nor cares whether oneDNN on the
// CPU or cuDNN/cuBLAS on GPUs computes the step.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
//                            CreateCpuBackend(spec, options));
//   StepInput in{features, labels, batch, /*step=*/k, /*example_offset=*/o};
//   PSTRAIN_ASSIGN_OR_RETURN(StepResult r, backend->TrainStep(in, weights,
//   &grads));
//   // grads hold sums over the batch; push them with r.examples.
//
// Gradient convention (what the ps expects): every gradient is the SUM over
// the batch's examples of d(per-example loss)/dw, plus batch * d(R)/dw for
// the variables with a Keras regularizer R (L1, L2, L1L2). The ps divides
// the sum of the pushes of a step by their summed batch sizes, so N workers
// compute exactly what one process with the global batch would: the mean
// loss's gradient plus the regularizer's gradient once.
//
// A Backend is used by one thread at a time.
#ifndef PSTRAIN_COMPUTE_BACKEND_H_
#define PSTRAIN_COMPUTE_BACKEND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

// The model's variables by Keras path ("conv2d/kernel"), in Keras shapes.
using Weights = std::map<std::string, const Tensor*>;
using Gradients = std::map<std::string, Tensor*>;

// The training loss: Keras's loss of the same name against each example's
// integer label y (proto/training.proto's LossConfig; each backend's header
// says how it computes them and which it supports).
enum class LossKind {
  kSparseCrossEntropy,       // sparse_categorical_crossentropy.
  kMeanSquaredError,         // mse, against one-hot(y), or y for one output.
  kCategoricalCrossEntropy,  // categorical_crossentropy on one-hot(y).
  kBinaryCrossEntropy,       // binary_crossentropy: one output, y 0 or 1.
  kMeanAbsoluteError,        // mae, targets as kMeanSquaredError.
  kHuber,                    // huber (delta 1.0), targets as mse.
};

// Keras's name of `kind`: "sparse_categorical_crossentropy", "mse", ...
absl::string_view LossKindName(LossKind kind);

// What a cross-entropy takes the model's output for: Keras's from_logits.
// Either way, an output that a final softmax or sigmoid produces is read
// behind: the loss takes the logits that activation was given, which is
// exact, as tf.keras does (it caches them on the activation's output and
// uses them whatever from_logits says, warning when it says true). The
// other losses ignore it.
enum class LossInput {
  // from_logits=True: any other output is the logits. The backends' default
  // for callers that do not say (the chief always says).
  kLogits,
  // from_logits=False: any other output is probabilities, clipped to
  // [1e-7, 1 - 1e-7] as Keras does.
  kProbabilities,
};

struct StepInput {
  // [batch, input shape...]: float32 features, or int32 ids for a model that
  // starts with an Embedding.
  const void* features = nullptr;
  // [batch] class labels (int32), for the sparse cross-entropy losses.
  const int32_t* labels = nullptr;
  int64_t batch = 0;
  // The global step; with `example_offset` (the index of this batch's first
  // example among the step's global batch) it keys dropout masks, so that a
  // step's masks do not depend on how its batch is split across workers.
  int64_t step = 0;
  int64_t example_offset = 0;
  // Changes whenever the weights' values change (the version pulled), so a
  // backend may cache per-step transforms of them (e.g. reordered kernels).
  uint64_t weights_version = 0;
  // Optional, [batch]: receives each example's score, for AUC: a strictly
  // increasing function of the probability the model gives label 1 (the
  // logit where the loss reads logits, else the output). REQUIRES a model
  // with one output unit. Only the CPU backend fills it.
  float* scores = nullptr;
  // Optional, [batch]: receives each example's probability of label 1 as
  // the loss reads it (a sigmoid of the logit, or the output clipped to
  // [1e-7, 1 - 1e-7]), for log loss and calibration. REQUIRES binary
  // cross-entropy. Only the CPU backend fills it.
  float* probabilities = nullptr;
  // Optional, TrainStep only: called on the computing thread as soon as a
  // variable's gradient in `gradients` is final (the backward's and L2's
  // parts), while the earlier layers' are still computed, so that a caller
  // can send it on (collective/local_replica.h overlaps its all-reduce so).
  // Each variable at most once per step; one not reported is final when
  // TrainStep returns. Only the CPU backend reports.
  std::function<void(const std::string& variable, absl::Span<float> gradient)>
      gradient_ready;
};

struct StepResult {
  // Sum over the batch of the per-example losses (without L2).
  double loss_sum = 0;
  // The regularization term: l1 * sum(|w|) + l2 * sum(w^2) over the
  // regularized variables (cpu/l2.h).
  double l2_loss = 0;
  // Examples whose prediction equals the label: the argmax of the output;
  // for binary cross-entropy, probability > 0.5 (Keras's binary accuracy);
  // for the other losses on a one-unit output, the output rounded.
  int64_t correct = 0;
  int64_t examples = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Forward and backward on one batch (training mode: dropout on). Writes
  // every variable's gradient into `gradients` (each already allocated in
  // its variable's shape), as described above.
  virtual absl::StatusOr<StepResult> TrainStep(const StepInput& input,
                                               const Weights& weights,
                                               Gradients* gradients) = 0;

  // Forward only, inference mode (dropout off).
  virtual absl::StatusOr<StepResult> Evaluate(const StepInput& input,
                                              const Weights& weights) = 0;
};

// The checks every Backend makes before it computes; `backend` names it in
// the message.
// INVALID_ARGUMENT for a negative batch, one over max_batch (> 0), a batch
// without features or labels, or a negative step or example_offset.
absl::Status CheckStepInput(absl::string_view backend, const StepInput& input,
                            int64_t max_batch);
// INVALID_ARGUMENT unless `tensor` is a float32 tensor of `def`'s shape;
// `what` is "weight" or "gradient".
absl::Status CheckVariableTensor(absl::string_view backend,
                                 absl::string_view what, const VariableDef& def,
                                 const Tensor* tensor);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_BACKEND_H_
