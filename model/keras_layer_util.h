// What the layer parsers (keras_*_layers.cc) share: the model-wide context,
// reading activations, windows, axes and shapes, and adding variables.
// A helper of keras_layers.
#ifndef PSTRAIN_MODEL_KERAS_LAYER_UTIL_H_
#define PSTRAIN_MODEL_KERAS_LAYER_UTIL_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/keras_fields.h"
#include "model/model_spec.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

// Largest dimension, filter count or unit count accepted.
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

// What every layer parser needs to know of the model.
struct ParseContext {
  uint64_t seed = 0;  // The run seed, from which variables' seeds derive.
  // The model was written by tf.keras 2.x or TensorFlow.js (its JSON's
  // "keras_version" is not 3.x): where Keras 3 changed a definition
  // (hard_sigmoid), the older one applies.
  bool keras2 = false;
};

// A window's or stride's (height, width).
using Window = std::pair<int, int>;

// The activation named in field `key` (`fallback` when absent or null) of
// a layer whose output has `rank` dimensions per example: sets the layer's
// activation and its parameters.
absl::Status ParseActivation(const KerasFields& fields, absl::string_view key,
                             std::optional<std::string> fallback,
                             const ParseContext& context, size_t rank,
                             LayerSpec* layer);

// "data_format" must mean channels_last (null is Keras's default, which is
// channels_last unless keras.json says otherwise).
absl::Status ExpectChannelsLast(const KerasFields& fields);

// Appends the variable `<layer>/<suffix>` of `shape` to `variables`, its
// initializer seeded from the run seed and its name.
absl::Status AddVariable(const KerasFields& fields, absl::string_view suffix,
                         const std::vector<int64_t>& shape, Initializer init,
                         bool sparse, uint64_t seed, LayerSpec* layer,
                         std::vector<VariableDef>* variables);

// Conv2D's and Dense's activation, kernel and bias: kernel of
// `kernel_shape`, bias of `units`, and their regularizers. The kernel's
// fields are `<kernel_key>_initializer`, `_regularizer` and `_constraint`
// and its variable `<layer>/<kernel_variable>` (DepthwiseConv2D:
// "depthwise", "depthwise_kernel"). REQUIRES: layer->output_shape is set.
absl::Status ParseKernelAndBias(const KerasFields& fields,
                                const std::vector<int64_t>& kernel_shape,
                                int64_t units, const ParseContext& context,
                                LayerSpec* layer,
                                std::vector<VariableDef>* variables,
                                absl::string_view kernel_key = "kernel",
                                absl::string_view kernel_variable = "kernel");

// A convolution's window: (height, width) of its kernel, strides and
// dilation_rate (a Conv1D's height is 1).
struct ConvWindow {
  Window kernel;
  Window strides{1, 1};
  Window dilation{1, 1};
};

// Conv2D's, DepthwiseConv2D's (one_d false, input [height, width,
// channels]) and Conv1D's (one_d, input [steps, channels]) padding
// ("valid", "same", and for Conv1D "causal") and window: sets the layer's
// window fields and its output_shape, whose channels are `out_channels`.
// Refuses, as Keras does, strides > 1 together with dilation_rate > 1.
absl::Status ParseConvWindow(const KerasFields& fields, const ConvWindow& w,
                             bool one_d, int64_t out_channels,
                             LayerSpec* layer);

// Conv1D's kernel_size, strides, dilation_rate: an integer n or a list [n],
// in [1, 2^31 - 1]; `fallback` when absent or null.
absl::StatusOr<int> ParseOneInt(const KerasFields& fields,
                                absl::string_view key,
                                std::optional<int> fallback);

// OK when the layer's input has `rank` dimensions per example; `meaning`
// names them for the message ("[height, width, channels]").
absl::Status ExpectRank(const KerasFields& fields, const LayerSpec& layer,
                        size_t rank, absl::string_view meaning);

// The pooling layers' strides and padding for a `window` read
// from field `window_key`; sets the layer's window fields and output_shape
// (with the input's channels).
absl::Status ParseWindow(const KerasFields& fields,
                         absl::string_view window_key, Window window,
                         Window default_strides, LayerSpec* layer);

// A number field >= 0; `fallback` when absent or null.
absl::StatusOr<float> NonNegative(const KerasFields& fields,
                                  absl::string_view key, double fallback);

// An axis of a per-example shape of `rank` from Keras's "axis", which
// counts the batch: -1 the last, 1 the first after the batch.
absl::StatusOr<int> ParseAxis(const KerasFields& fields, size_t rank,
                              int64_t fallback);

// Refuses every dtype but float32, as a string or a Keras dtype policy.
absl::Status ExpectFloat32(const KerasFields& fields);

// The per-example shape of the batch shape [batch, d1, d2, ...] in `key`;
// the batch dimension may be anything, the others must be known.
absl::StatusOr<std::vector<int64_t>> ParseBatchShape(const KerasFields& fields,
                                                     absl::string_view key);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_LAYER_UTIL_H_
