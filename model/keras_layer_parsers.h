// The parser of each layer class pstrain computes, grouped by the file that
// defines it. Each reads a layer's config from `fields`, fills `layer`
// (whose name, inputs and input shapes are set) and appends its variables.
// A helper of keras_layers.
#ifndef PSTRAIN_MODEL_KERAS_LAYER_PARSERS_H_
#define PSTRAIN_MODEL_KERAS_LAYER_PARSERS_H_

#include <vector>

#include "absl/status/status.h"
#include "model/keras_fields.h"
#include "model/keras_layer_util.h"
#include "model/model_spec.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace worker {

using LayerParser = absl::Status (*)(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);

// keras_core_layers.cc
absl::Status ParseConv2D(const KerasFields& fields, const ParseContext& context,
                         LayerSpec* layer, std::vector<VariableDef>* variables);
absl::Status ParseDepthwiseConv2D(const KerasFields& fields,
                                  const ParseContext& context, LayerSpec* layer,
                                  std::vector<VariableDef>* variables);
absl::Status ParseConv1D(const KerasFields& fields, const ParseContext& context,
                         LayerSpec* layer, std::vector<VariableDef>* variables);
absl::Status ParseMaxPooling2D(const KerasFields& fields,
                               const ParseContext& context, LayerSpec* layer,
                               std::vector<VariableDef>* variables);
absl::Status ParseFlatten(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);
absl::Status ParseDense(const KerasFields& fields, const ParseContext& context,
                        LayerSpec* layer, std::vector<VariableDef>* variables);
absl::Status ParseDropout(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);
absl::Status ParseEmbedding(const KerasFields& fields,
                            const ParseContext& context, LayerSpec* layer,
                            std::vector<VariableDef>* variables);

// keras_activation_layers.cc
absl::Status ParseActivationLayer(const KerasFields& fields,
                                  const ParseContext& context, LayerSpec* layer,
                                  std::vector<VariableDef>* variables);
absl::Status ParseReLU(const KerasFields& fields, const ParseContext& context,
                       LayerSpec* layer, std::vector<VariableDef>* variables);
absl::Status ParseLeakyReLU(const KerasFields& fields,
                            const ParseContext& context, LayerSpec* layer,
                            std::vector<VariableDef>* variables);
absl::Status ParseELU(const KerasFields& fields, const ParseContext& context,
                      LayerSpec* layer, std::vector<VariableDef>* variables);
absl::Status ParseSoftmax(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);

// keras_merge_layers.cc
absl::Status ParseAdd(const KerasFields& fields, const ParseContext& context,
                      LayerSpec* layer, std::vector<VariableDef>* variables);
absl::Status ParseSubtract(const KerasFields& fields,
                           const ParseContext& context, LayerSpec* layer,
                           std::vector<VariableDef>* variables);
absl::Status ParseMultiply(const KerasFields& fields,
                           const ParseContext& context, LayerSpec* layer,
                           std::vector<VariableDef>* variables);
absl::Status ParseAverage(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);
absl::Status ParseMaximum(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);
absl::Status ParseMinimum(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);
absl::Status ParseConcatenate(const KerasFields& fields,
                              const ParseContext& context, LayerSpec* layer,
                              std::vector<VariableDef>* variables);

// keras_normalization_layers.cc
absl::Status ParseBatchNormalization(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);
absl::Status ParseLayerNormalization(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);

// keras_reshaping_layers.cc
absl::Status ParseAveragePooling2D(const KerasFields& fields,
                                   const ParseContext& context,
                                   LayerSpec* layer,
                                   std::vector<VariableDef>* variables);
absl::Status ParseGlobalAveragePooling1D(const KerasFields& fields,
                                         const ParseContext& context,
                                         LayerSpec* layer,
                                         std::vector<VariableDef>* variables);
absl::Status ParseGlobalAveragePooling2D(const KerasFields& fields,
                                         const ParseContext& context,
                                         LayerSpec* layer,
                                         std::vector<VariableDef>* variables);
absl::Status ParseGlobalMaxPooling1D(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);
absl::Status ParseGlobalMaxPooling2D(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);
absl::Status ParseZeroPadding2D(const KerasFields& fields,
                                const ParseContext& context, LayerSpec* layer,
                                std::vector<VariableDef>* variables);
absl::Status ParseReshape(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);
absl::Status ParsePermute(const KerasFields& fields,
                          const ParseContext& context, LayerSpec* layer,
                          std::vector<VariableDef>* variables);
absl::Status ParseRescaling(const KerasFields& fields,
                            const ParseContext& context, LayerSpec* layer,
                            std::vector<VariableDef>* variables);

// keras_attention_layers.cc
absl::Status ParseMultiHeadAttention(const KerasFields& fields,
                                     const ParseContext& context,
                                     LayerSpec* layer,
                                     std::vector<VariableDef>* variables);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_LAYER_PARSERS_H_
