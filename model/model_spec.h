// A model as pstrain computes it: its layers with their shapes and options,
// and its variables, whatever the JSON it was read from (keras_model.h).
#ifndef PSTRAIN_MODEL_MODEL_SPEC_H_
#define PSTRAIN_MODEL_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/tensor.pb.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

enum class LayerKind {
  kConv2D,
  kMaxPool2D,
  kFlatten,
  kDense,
  kDropout,
  kEmbedding,
  // Keras's Activation, ReLU, LeakyReLU, ELU and Softmax layers.
  kActivation,
  // Keras's Add, Subtract, Multiply, Average, Maximum and Minimum: one
  // elementwise op over inputs of one shape.
  kMerge,
  kConcatenate,
  kBatchNormalization,
  kLayerNormalization,
  kAveragePooling2D,
  // GlobalAveragePooling1D/2D and GlobalMaxPooling1D/2D: over every axis
  // but the last.
  kGlobalPooling,
  kZeroPadding2D,
  kReshape,  // Reshape: the same elements in the same order.
  kPermute,
  kRescaling,
  // Keras's MultiHeadAttention: inputs query, value and (when given) key.
  kMultiHeadAttention,
};

// Keras's activations, as functions of x (elementwise unless stated).
enum class Activation {
  kLinear,
  kRelu,       // max(x, 0).
  kKerasRelu,  // Keras's ReLU layer with ActivationParams' max_value,
               // negative_slope, threshold (relu6, leaky_relu, LeakyReLU).
  kSoftmax,    // Over ActivationParams::axis.
  kLogSoftmax,
  kGelu,      // x * Phi(x), Phi the normal CDF (Keras approximate=False).
  kGeluTanh,  // Its tanh approximation (approximate=True).
  kSigmoid,
  kHardSigmoid,  // Keras 3: clip(x / 6 + 0.5, 0, 1).
  kTanh,
  kSilu,  // x * sigmoid(x) (Keras's silu and swish).
  kElu,   // x > 0 ? x : alpha * (exp(x) - 1).
  kSelu,
  kSoftplus,  // log(1 + exp(x)).
};

struct ActivationParams {
  // kKerasRelu: x >= max_value gives max_value; threshold <= x < max_value
  // gives x; below threshold, negative_slope * (x - threshold).
  float max_value = 0;  // 0: no maximum.
  float negative_slope = 0;
  float threshold = 0;
  float alpha = 1;  // kElu.
  // kSoftmax, kLogSoftmax: the axis of the per-example shape (0-based).
  int axis = 0;
};

// Keras's L1, L2 and L1L2 weight regularizers: a penalty
// l1 * sum(|w|) + l2 * sum(w^2) added to the loss (compute/cpu/l2.h).
struct Regularizer {
  float l1 = 0;
  float l2 = 0;
  bool active() const { return l1 != 0 || l2 != 0; }
};

enum class MergeOp { kAdd, kSubtract, kMultiply, kAverage, kMaximum, kMinimum };

// Where a layer's input comes from: the output of an earlier layer
// (ModelSpec::layers[index]) or one of the model's inputs
// (ModelSpec::inputs[index]).
struct TensorRef {
  bool model_input = false;
  int index = 0;

  friend bool operator==(const TensorRef& a, const TensorRef& b) {
    return a.model_input == b.model_input && a.index == b.index;
  }
};

// One call of a layer in the model (a layer called twice, with shared
// weights, appears twice, its variables listed by both). Shapes are per
// example (no batch dimension), channels_last: [height, width, channels] for
// images.
struct LayerSpec {
  // Keras's name, e.g. "conv2d_1"; for a layer of a Sequential model nested
  // in a Functional one, "<sequential>/<layer>".
  std::string name;
  LayerKind kind = LayerKind::kActivation;
  // What it reads, in Keras's order (one entry for the layers supported
  // today), always earlier layers or model inputs.
  std::vector<TensorRef> inputs;
  // The shape of inputs[0], and of every input.
  std::vector<int64_t> input_shape;
  std::vector<std::vector<int64_t>> input_shapes;
  std::vector<int64_t> output_shape;

  // Conv2D: filters, kernel and strides. MaxPool2D: the pool size in kernel_h
  // and kernel_w, and strides. Both: same_padding is Keras's "same" (output
  // ceil(in / stride)), else "valid" (floor((in - kernel) / stride) + 1).
  // kConv2D also computes Keras's DepthwiseConv2D (depthwise: groups is the
  // input's channels, filters = channels * depth_multiplier) and Conv1D (an
  // input of rank 2, [steps, channels], seen as height 1: kernel_h,
  // stride_h and dilation_h are 1). causal_padding: Conv1D's "causal",
  // (kernel_w - 1) * dilation_w zeros on the left only.
  int filters = 0;
  int kernel_h = 0;
  int kernel_w = 0;
  int stride_h = 1;
  int stride_w = 1;
  bool same_padding = false;
  int dilation_h = 1;
  int dilation_w = 1;
  int groups = 1;
  bool depthwise = false;
  bool causal_padding = false;

  int64_t units = 0;  // Dense.

  // Conv2D and Dense apply it after the bias; an activation layer is only
  // this.
  Activation activation = Activation::kLinear;
  ActivationParams activation_params;

  MergeOp merge = MergeOp::kAdd;  // kMerge.
  int axis = 0;  // kConcatenate: the axis of the per-example shape.

  // kBatchNormalization, kLayerNormalization: over the last axis. Variables
  // gamma (scale), beta (center), and for BatchNormalization
  // moving_mean, moving_variance (moving averages of `momentum`).
  float epsilon = 1e-3f;
  float momentum = 0.99f;
  bool center = true;
  bool scale = true;

  bool global_max = false;  // kGlobalPooling: max, else average.
  // kZeroPadding2D: rows added above and below, columns left and right.
  int pad_top = 0;
  int pad_bottom = 0;
  int pad_left = 0;
  int pad_right = 0;
  // kPermute: output axis i is input axis permutation[i] (0-based, per
  // example).
  std::vector<int> permutation;
  // kRescaling: y = x * rescale + offset.
  float rescale = 1;
  float offset = 0;
  // kMultiHeadAttention: Keras's num_heads, key_dim, value_dim, the
  // output's last dimension (output_shape), and the call's
  // use_causal_mask. Variables query/, key/, value/ and attention_output/
  // kernel and bias.
  int64_t num_heads = 0;
  int64_t key_dim = 0;
  int64_t value_dim = 0;
  int64_t attention_output_dim = 0;
  bool causal = false;

  // Conv2D (and DepthwiseConv2D, Conv1D) and Dense: the regularizers of the
  // kernel (variables[0]; DepthwiseConv2D's depthwise_regularizer) and of
  // the bias (variables[1]): the worker adds their penalties to the loss.
  bool use_bias = true;
  Regularizer kernel_regularizer;
  Regularizer bias_regularizer;

  // Dropout: fraction of inputs zeroed in training, in [0, 1). Keras's
  // "seed" is ignored; masks come from the run seed.
  float rate = 0;

  // Embedding: ids in [0, input_dim) map to rows of output_dim floats.
  int64_t input_dim = 0;
  int64_t output_dim = 0;

  // Names of this layer's variables in ModelSpec::variables, kernel first:
  // {"conv2d_1/kernel", "conv2d_1/bias"}, {"embedding/embeddings"}.
  std::vector<std::string> variables;
  // Another call of a layer called earlier (layers[shares]); -1: the first
  // or only call.
  int shares = -1;
};

// One input of the model (a Keras InputLayer).
struct InputSpec {
  std::string name;
  // Per example, as declared: {28, 28, 1}, {28, 28}, or {T} for Embedding.
  std::vector<int64_t> shape;
  // DT_FLOAT, or DT_INT32 when it feeds an Embedding (its values are ids).
  DataType dtype = DT_FLOAT;
};

struct ModelSpec {
  std::string name;  // Keras's model name, e.g. "sequential".
  // In Keras's order (a Sequential model has one).
  std::vector<InputSpec> inputs;
  // inputs[0]'s shape and dtype.
  std::vector<int64_t> input_shape;
  DataType input_dtype = DT_FLOAT;
  // In an order where every layer comes after those it reads (a Sequential
  // model's order); the InputLayers are not included.
  std::vector<LayerSpec> layers;
  // Every variable, in layer order (kernel, then bias), DT_FLOAT, with Keras's
  // shapes: conv kernel [kh, kw, in, out], dense kernel [in, out], bias
  // [units], embeddings [input_dim, output_dim] (sparse). Initializer seeds
  // are DeriveSeed(seed, name) (common/derived_seed.h): an explicit
  // Keras "seed" is ignored, so that every variable's stream differs and the
  // run seed alone fixes them all.
  std::vector<VariableDef> variables;
  // The layers whose outputs are the model's, in Keras's order (a Sequential
  // model's last layer).
  std::vector<int> outputs;
  // The output_shape of layers[outputs[0]].
  std::vector<int64_t> output_shape;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_MODEL_SPEC_H_
