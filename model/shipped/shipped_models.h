// The Keras models shipped with pstrain, compiled into the binary so that
// `--model=cnn` works wherever the binary is copied, with no runfiles or data
// directory to find.
//
// Each <name>.json in this folder (a Keras Sequential model's model.to_json())
// becomes one entry, named after the file; embed_json.sh writes the table at
// build time. Use model/keras_model.h's LoadModel("cnn") rather than
// this table directly.
//
//   for (const ShippedModel& model : ShippedModels()) {
//     std::cout << model.name << "\n";
//   }
#ifndef PSTRAIN_MODEL_SHIPPED_SHIPPED_MODELS_H_
#define PSTRAIN_MODEL_SHIPPED_SHIPPED_MODELS_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pstrain {
namespace worker {

struct ShippedModel {
  absl::string_view name;  // "cnn", the file name without ".json".
  absl::string_view json;  // The file's text.
};

// Every shipped model, sorted by name. The table is constant-initialized, so
// it may be used at any time, even during static initialization.
absl::Span<const ShippedModel> ShippedModels();

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_SHIPPED_SHIPPED_MODELS_H_
