// The Backend (compute/backend.h) that trains a Keras model on the CPU with
// oneDNN: forward, loss and backward of one batch per call, through the
// model's layer graph (layer_graph.h).
//
//   PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec, LoadModel("cnn", run_seed));
//   CpuBackendOptions options;
//   options.num_threads = 2;
//   options.run_seed = run_seed;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
//                            CreateCpuBackend(spec, options));
//   StepInput in;
//   in.features = batch.features.data<float>();  // [B, 28, 28]
//   in.labels = batch.labels.data<int32_t>();
//   in.batch = B;
//   in.step = step;
//   in.example_offset = offset;
//   in.weights_version = pulled_version;
//   PSTRAIN_ASSIGN_OR_RETURN(StepResult r, backend->TrainStep(in, w, &g));
//
// Features: float32 [batch, elements per example], laid out as Keras's input
// (NHWC for images); any shape with the declared number of elements per
// example is accepted (a [B, 28, 28] batch feeds a model declared
// [28, 28, 1]). A model whose input an Embedding reads takes int32 ids
// [batch, sequence length] instead; an id outside the table is
// INVALID_ARGUMENT. A model of several inputs takes each example's row as
// data/model_input.h lays them out (float32 rows, whose id columns hold
// exact ids, or int32 rows when every input takes ids).
//
// Loss (StepResult::loss_sum is its sum over the batch), every LossKind, as
// Keras computes it (cpu/losses.h's LabelLoss):
//   cross-entropies (sparse, categorical on one-hot rows of the labels,
//       binary on one output unit with labels 0 and 1). When the model ends
//       in a softmax or a sigmoid (a last Dense's activation or a final
//       activation layer), the logits are that activation's input and the
//       activation is never computed: this is what tf.keras does on such an
//       output, whatever from_logits says (it reads the logits behind it),
//       and it is exact where the probabilities would underflow. Any other
//       output is the logits (LossInput::kLogits) or probabilities clipped
//       to [1e-7, 1 - 1e-7] as Keras does (kProbabilities).
//   kMeanSquaredError, kMeanAbsoluteError, kHuber (delta 1): on the model's
//       output (softmax included), against one-hot rows of the labels, or
//       against the label itself when the model has one output.
// The output must be one vector per example (rank 1, e.g. a Dense layer).
// correct counts rows whose argmax is the label; binary cross-entropy:
// whose probability > 0.5 matches the label; the other losses on one
// output: whose value rounds to the label. StepInput::scores, when given,
// receives each example's output (the logit where the loss reads logits).
//
// Gradients follow backend.h's convention: sums over the batch, plus
// batch * 2 * l2 * w for each kernel with an L2 regularizer; l2_loss is
// l2 * sum(w^2) over those kernels. Dropout (training only) draws its masks
// from the layer's global stream of RngTracker(run_seed, replica), keyed by
// (step, example_offset + row), so a step's masks do not depend on how its
// global batch is split between workers (see compute/rng_tracker.h).
//
// Ops and every activation and gradient buffer are made once per batch size
// and reused (the last batch of an epoch may be smaller; a few sizes are
// kept, least recently used dropped). Kernels that oneDNN wants in another
// layout are reordered once per weights_version: pass a new version
// whenever the weights' values change.
//
// A batch of 0 examples (a worker with nothing left in an epoch's last
// step) is valid: its gradients are zeros (features and labels may be null).
//
// Errors: INVALID_ARGUMENT for a missing or misshapen weight or gradient,
// null inputs, a batch out of range, a label or id out of range; oneDNN
// failures as their statuses. Like every Backend, used by one thread at a
// time.
#ifndef PSTRAIN_COMPUTE_CPU_CPU_BACKEND_H_
#define PSTRAIN_COMPUTE_CPU_CPU_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "compute/backend.h"
#include "compute/precision.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {

struct CpuBackendOptions {
  // oneDNN's threads; 0: the OpenMP default (one per core).
  int num_threads = 0;
  // The run's seed and this replica's index (worker task index), for the
  // random streams of RngTracker. Dropout uses only global streams, so its
  // masks do not depend on the replica.
  uint64_t run_seed = 0;
  int replica = 0;
  LossKind loss = LossKind::kSparseCrossEntropy;
  LossInput loss_input = LossInput::kLogits;  // Keras's from_logits.
  // Largest batch accepted (larger: INVALID_ARGUMENT); 0: no limit.
  int64_t max_batch = 0;
  // kBf16: Conv2D (and its variants) and Dense compute in bf16 with float32
  // accumulation (conv2d.h, dense.h); weights, gradients, the loss and the
  // other layers stay float32.
  Precision precision = Precision::kFp32;
};

// INVALID_ARGUMENT for options out of range or a model this backend cannot
// train (an output that is not one vector per example); FAILED_PRECONDITION
// for kBf16 on a CPU without AVX-512 BF16 or AMX (bf16_support.h, naming
// the missing feature); otherwise the
// backend, with no ops made yet (they come with the first batch of each
// size).
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    const ModelSpec& spec, const CpuBackendOptions& options);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_CPU_BACKEND_H_
