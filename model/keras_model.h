// The model a worker trains, read from a Keras model's JSON (what
// `model.to_json()` writes), so that a model defined and checked in Keras is
// trained by pstrain unchanged, and its variables carry Keras's names.
//
//   absl::StatusOr<ModelSpec> model = LoadModel("cnn", /*seed=*/42);
//   if (!model.ok()) { std::cerr << model.status().message() << "\n"; }
//   for (const LayerSpec& layer : model->layers) ...  // the layer graph
//   for (const VariableDef& v : model->variables) ...  // made on the ps
//
// Sequential and Functional models (keras_functional.h) are read in both
// serializations: tf.keras 2.x ({"class_name", "config"}, an InputLayer with
// "batch_input_shape", or that field on the first layer; TensorFlow.js
// writes this form too) and Keras 3 ("module", "registered_name",
// "build_config", an InputLayer with "batch_shape", dtypes as DTypePolicy
// objects). Equivalent models in the two forms give equal ModelSpecs.
//
// Anything that would change what is computed and is not supported (another
// layer, a constraint, an L1 penalty, dilation, channels_first, a frozen
// layer, a non-float32 dtype, Keras 3's quantization or LoRA) is refused
// rather than ignored, so a model either trains as Keras would train it or
// does not load. Fields that do not change the computation (a layer's
// "build_config", "sparse" on the InputLayer, ...) are ignored.
#ifndef PSTRAIN_MODEL_KERAS_MODEL_H_
#define PSTRAIN_MODEL_KERAS_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_spec.h"

namespace pstrain {
namespace worker {

// Reads `json`, a Keras Sequential or Functional model, with `seed` the run
// seed. Supported:
//   InputLayer    batch_shape / batch_input_shape (batch dimension null or
//                 any; every other dimension known)
//   Conv2D        filters, kernel_size, strides, padding "valid"|"same",
//                 dilation_rate (strides 1 where it is above 1, as Keras),
//                 activation, use_bias, kernel_initializer, bias_initializer,
//                 kernel_regularizer, bias_regularizer; data_format
//                 channels_last (or null), groups 1; rank-3 input
//   DepthwiseConv2D  kernel_size, strides, padding, depth_multiplier,
//                 dilation_rate, activation, use_bias, depthwise_initializer,
//                 bias_initializer, depthwise_regularizer, bias_regularizer;
//                 rank-3 input; variable depthwise_kernel [kh, kw, in, mult]
//   Conv1D        filters, kernel_size, strides, padding "valid"|"same"|
//                 "causal", dilation_rate, activation, use_bias, the
//                 initializers and regularizers; groups 1; input [steps,
//                 channels]; kernel [k, in, filters]
//   MaxPooling2D  pool_size, strides (null: pool_size), padding; rank-3 input
//   Flatten       any input (data_format channels_last or null)
//   Dense         units, activation, use_bias, initializers,
//                 kernel_regularizer, bias_regularizer; on the last axis of
//                 any input
//   Dropout       rate in [0, 1)
//   Embedding     input_dim, output_dim, embeddings_initializer (default
//                 RandomUniform(-0.05, 0.05)); reads a model input [T] of int
//                 ids (in a Sequential model, as its first layer), output
//                 [T, output_dim]
//   Activation    activation (below)
//   ReLU          max_value (null or > 0), negative_slope >= 0,
//                 threshold >= 0
//   LeakyReLU     negative_slope (tf.keras 2.x: alpha), default 0.3
//   ELU           alpha
//   Softmax       axis (an int; not the batch axis)
//   Add, Subtract, Multiply, Average, Maximum, Minimum
//                 two or more inputs of one shape (Subtract: two)
//   Concatenate   axis; inputs of one rank agreeing on the other axes
// Activations (Conv2D, Dense, Activation): linear (or null), relu, relu6,
// leaky_relu, softmax, log_softmax, gelu, gelu_new (TensorFlow.js's tanh
// approximation), sigmoid, hard_sigmoid (tf.keras 2.x's 0.2 x + 0.5 for a
// model it or TensorFlow.js wrote, Keras 3's x / 6 + 0.5 otherwise), tanh,
// silu, swish, elu, selu, softplus. Initializers: keras_objects.h.
// Regularizers: L1{l1}, L2{l2}, L1L2{l1, l2} (none on an Embedding: its
// table lives on the ps). Layer names must be unique,
// non-empty and free of '/'.
//
// Errors are INVALID_ARGUMENT, one line starting "model: " that names the
// layer by its index in the JSON "layers" list (from 0, the InputLayer
// included), its name and class, and the field, e.g.
//   model: layer 3 'conv2d_1' (Conv2D): padding "causal" is not supported
//   (expected "valid" or "same")
// and for invalid JSON the line and column.
absl::StatusOr<ModelSpec> ParseKerasModel(absl::string_view json,
                                          uint64_t seed);

// The model `name_or_path` names: a shipped model ("cnn", "mlp"; see
// model/shipped/), else the path of a JSON file to read. Errors from the
// model start with `model "<name_or_path>": `; a file that cannot be read
// gives the errno's code (NOT_FOUND, ...) and lists the shipped models.
absl::StatusOr<ModelSpec> LoadModel(absl::string_view name_or_path,
                                    uint64_t seed);

// The JSON text LoadModel parses (what the chief hands to the workers).
absl::StatusOr<std::string> LoadModelJson(absl::string_view name_or_path);

// Number of floats in all of `model`'s variables.
int64_t ParameterCount(const ModelSpec& model);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_MODEL_H_
