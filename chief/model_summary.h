// A model as Keras's model.summary() shows it, in Markdown: the layers with
// their type, per-example output shape and number of parameters, and the
// totals. The chief logs it as a TensorBoard text summary (chief/run_log.h),
// which TensorBoard's Text tab renders as a table.
//
//   const std::string markdown = ModelSummary(spec);
#ifndef PSTRAIN_CHIEF_MODEL_SUMMARY_H_
#define PSTRAIN_CHIEF_MODEL_SUMMARY_H_

#include <string>

#include "model/model_spec.h"

namespace pstrain {
namespace chief {

// Keras's class name for a layer kind ("Conv2D", "Dense", ...).
std::string LayerTypeName(const worker::LayerSpec& layer);

// The summary: "Model: \"<name>\"", a table | Layer (type) | Output Shape |
// Param # | with a row per layer (a shared layer's second call counts no
// parameters, as Keras counts a variable once), then the total, trainable
// and non-trainable (moving averages) parameters. An embedding table that
// grows on first touch counts its declared rows (none).
std::string ModelSummary(const worker::ModelSpec& spec);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_MODEL_SUMMARY_H_
