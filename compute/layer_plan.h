// How a model's layer graph maps onto ops: the stages that the layer-graph
// executor (compute/layer_graph.h) turns into ops of the CPU
// (compute/cpu/graph_stage.h) or of a GPU (compute/gpu/graph_stage.h), so
// that both compute the same model the same way.
//
//   LayerPlanOptions options;
//   options.drop_final_softmax = true;  // A loss from logits.
//   options.fuse_conv_relu = true;      // oneDNN runs a Conv2D's ReLU.
//   PSTRAIN_ASSIGN_OR_RETURN(LayerPlan plan, PlanLayers(spec, options, rng));
//   for (const StagePlan& stage : plan.stages) { ... make its op ... }
//
// Layers map to stages as follows: Conv2D, DepthwiseConv2D (a grouped
// convolution) and Conv1D (one of height 1) to kConv2D (its ReLU fused into
// the convolution with fuse_conv_relu, else a ReLU stage in place after it),
// MaxPooling2D to kMaxPool2D, Dense to kDense (+ an in-place ReLU stage),
// Dropout to kDropout (none for rate 0), Embedding to kEmbedding (reading a
// model input), merge layers to kMerge, Concatenate to kConcatenate, the
// normalization, pooling, padding, Permute and Rescaling layers to their
// own kinds, activation layers and the activations of Conv2D and Dense to
// kRelu (plain ReLU), kSoftmax (softmax over the last axis) or kActivation
// (any other). Flatten, Reshape and linear activations are no stages at
// all: an NHWC activation
// already is the flattened matrix (window.h), and only the number of
// elements per example matters. With drop_final_softmax a softmax that ends
// the model is left out, so that the graph's output is its input, the
// logits.
//
// Stages come in an order where each follows the stages it reads. Shapes in
// a plan are per example: their `batch` (and the embedding's `ids`, the
// softmax's `batch`, the dense's rows) count one example; an executor
// multiplies them by its batch size.
#ifndef PSTRAIN_COMPUTE_LAYER_PLAN_H_
#define PSTRAIN_COMPUTE_LAYER_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/rng_tracker.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {

enum class StageKind {
  kEmbedding,
  kConv2D,
  kMaxPool2D,
  kDense,
  kRelu,
  kSoftmax,
  kDropout,
  kActivation,
  kMerge,
  kConcatenate,
  kBatchNormalization,
  kLayerNormalization,
  kAveragePooling2D,  // Its shape in `pool`.
  kGlobalPooling,
  kZeroPadding2D,
  kPermute,
  kRescaling,
  kMultiHeadAttention,  // Inputs query, value and maybe key.
};

struct StagePlan {
  StageKind kind = StageKind::kRelu;
  std::string layer;  // The Keras layer it computes (part of).
  // What it reads: a model input, or the output of stages[index] (always an
  // earlier stage). One for every kind but kMerge and kConcatenate.
  std::vector<TensorRef> inputs;
  int64_t in_size = 0;            // Elements per example of inputs[0].
  std::vector<int64_t> in_sizes;  // ... of each input.
  int64_t out_size = 0;           // ... and of its output.
  // Each input's shape, per example (set for the stage of a layer, not for
  // an activation added after one).
  std::vector<std::vector<int64_t>> in_shapes;
  // Indices into the model's variables; -1: none. The normalizations' gamma
  // is their `kernel`, beta their `bias`.
  int kernel = -1;
  int bias = -1;
  int moving_mean = -1;  // BatchNormalization's moving statistics.
  int moving_variance = -1;
  // The output overwrites inputs[0], which no other stage reads (a ReLU
  // after Conv2D or Dense).
  bool in_place = false;
  // Backward must produce the gradient of inputs[i] (something before it
  // is trainable), and of some input.
  std::vector<bool> input_needs_dx;
  bool needs_dx = false;

  // The shape of the stage's op, for one example.
  cpu::EmbeddingShape embedding;
  cpu::Conv2DShape conv;  // fuse_relu: the stage applies its layer's ReLU.
  cpu::Pool2DShape pool;
  cpu::DenseShape dense;
  cpu::SoftmaxShape softmax;
  cpu::ActivationShape activation;
  float dropout_rate = 0;
  uint64_t dropout_seed = 0;  // The layer's global stream (rng_tracker.h).
  MergeOp merge = MergeOp::kAdd;
  // kConcatenate: each example is `concat_rows` rows, each input
  // contributing in_sizes[i] / concat_rows elements to each.
  int64_t concat_rows = 1;
  // kBatchNormalization, kLayerNormalization: over the last axis.
  float epsilon = 1e-3f;
  bool center = true;
  bool scale = true;
  bool global_max = false;  // kGlobalPooling.
  int pad_top = 0;          // kZeroPadding2D.
  int pad_bottom = 0;
  int pad_left = 0;
  int pad_right = 0;
  std::vector<int> permutation;  // kPermute: 0-based, per example.
  float rescale = 1;             // kRescaling.
  float offset = 0;
  // kMultiHeadAttention: Keras's sizes, per example, and its variables in
  // Keras's order (query, key, value, attention_output; kernel then bias;
  // -1 for the biases without use_bias).
  int64_t heads = 0;
  int64_t key_dim = 0;
  int64_t value_dim = 0;
  int64_t output_dim = 0;
  bool use_bias = true;
  bool causal = false;
  std::vector<int> attention_variables;

  bool has_variables() const {
    return kernel >= 0 || bias >= 0 || moving_mean >= 0 ||
           !attention_variables.empty();
  }
  // Whether Backward runs it: it learns something or passes a gradient on.
  bool in_backward() const { return has_variables() || needs_dx; }
};

struct LayerPlan {
  std::vector<StagePlan> stages;
  int num_inputs = 0;  // The model's inputs.
  // The stage whose output is the graph's (the logits with
  // drop_final_softmax).
  int output = -1;
  // The first stage with variables; -1: none.
  int first_trainable = -1;
  // Elements per example of the output.
  int64_t output_size = 0;
};

struct LayerPlanOptions {
  bool drop_final_softmax = true;
  bool fuse_conv_relu = false;
};

// INVALID_ARGUMENT naming the layer for what no stage can compute (an
// Embedding that does not read a model input, a Conv2D or MaxPooling2D on
// an input that is not rank 3, a variable the spec lacks, a layer that does
// not lead to the output).
absl::StatusOr<LayerPlan> PlanLayers(const ModelSpec& spec,
                                     const LayerPlanOptions& options,
                                     const RngTracker& rng);

// A variable with a Keras regularizer (a kernel's, depthwise kernel's or
// bias's), whose penalty the backends add to the loss (cpu/l2.h).
struct RegularizedVariable {
  int variable = 0;  // Index into the model's variables.
  Regularizer regularizer;
};

// Every regularized variable of `spec`, once each (a shared layer's second
// call adds none), in the order of the variables.
std::vector<RegularizedVariable> RegularizedVariables(const ModelSpec& spec);

// `status` with "layer '<layer>': " in front of its message.
absl::Status InLayer(const std::string& layer, const absl::Status& status);

// Moves the op an op factory made into *into, or returns its error with the
// layer named: what both devices' GraphStages do for each stage's op.
template <typename Op>
absl::Status TakeOp(const std::string& layer,
                    absl::StatusOr<std::unique_ptr<Op>> op,
                    std::unique_ptr<Op>* into) {
  if (!op.ok()) return InLayer(layer, op.status());
  *into = std::move(*op);
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_LAYER_PLAN_H_
