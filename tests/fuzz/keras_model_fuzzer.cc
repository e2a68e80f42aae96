// Fuzzes the Keras model JSON parser (model/keras_model.h): the input
// is a model's JSON. Beyond not crashing, checks the header's promises: a
// failure is INVALID_ARGUMENT with one line starting "model: "; a success is
// a graph of layers, each reading model inputs or earlier layers whose
// shapes are its input shapes, with known positive dimensions, an output
// that is a layer, and variables that exist, fit in memory's address space
// and are counted by ParameterCount.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tensor.h"
#include "model/keras_model.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace worker {
namespace {

void CheckShape(const std::vector<int64_t>& shape, const std::string& what) {
  PSTRAIN_FUZZ_EXPECT(!shape.empty(), what, " has rank 0");
  for (int64_t dim : shape) {
    PSTRAIN_FUZZ_EXPECT(dim >= 1, what, " ", ShapeString(shape));
  }
}

void CheckModel(const ModelSpec& model) {
  PSTRAIN_FUZZ_EXPECT(!model.layers.empty(), "no layers");
  CheckShape(model.input_shape, "input shape");
  std::set<std::string> variables;
  for (const VariableDef& v : model.variables) {
    const std::vector<int64_t> shape(v.shape().dims().begin(),
                                     v.shape().dims().end());
    CheckShape(shape, v.name());
    PSTRAIN_FUZZ_EXPECT(NumElements(shape, sizeof(float)).ok(), v.name(),
                        " ", ShapeString(shape));
    PSTRAIN_FUZZ_EXPECT(variables.insert(v.name()).second,
                        "two variables named ", v.name());
  }
  PSTRAIN_FUZZ_EXPECT(
      !model.inputs.empty() && model.input_shape == model.inputs[0].shape,
      "input shape");
  for (const InputSpec& input : model.inputs) {
    CheckShape(input.shape, "input " + input.name);
  }
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerSpec& layer = model.layers[i];
    PSTRAIN_FUZZ_EXPECT(!layer.inputs.empty() &&
                            layer.inputs.size() == layer.input_shapes.size(),
                        layer.name, ": ", layer.inputs.size(), " inputs");
    for (size_t k = 0; k < layer.inputs.size(); ++k) {
      const TensorRef& ref = layer.inputs[k];
      const bool known =
          ref.model_input
              ? ref.index >= 0 &&
                    static_cast<size_t>(ref.index) < model.inputs.size()
              : ref.index >= 0 && static_cast<size_t>(ref.index) < i;
      PSTRAIN_FUZZ_EXPECT(known, layer.name, " reads unknown tensor ",
                          ref.index);
      const std::vector<int64_t>& shape =
          ref.model_input ? model.inputs[ref.index].shape
                          : model.layers[ref.index].output_shape;
      PSTRAIN_FUZZ_EXPECT(
          layer.input_shapes[k] == shape, layer.name, ": input ", k, " ",
          ShapeString(layer.input_shapes[k]), " from ", ShapeString(shape));
    }
    PSTRAIN_FUZZ_EXPECT(layer.input_shape == layer.input_shapes[0], layer.name);
    CheckShape(layer.output_shape, layer.name + " output");
    for (const std::string& name : layer.variables) {
      PSTRAIN_FUZZ_EXPECT(variables.count(name) == 1, layer.name,
                          " names unknown variable ", name);
    }
  }
  PSTRAIN_FUZZ_EXPECT(
      model.outputs.size() == 1 && model.outputs[0] >= 0 &&
          static_cast<size_t>(model.outputs[0]) < model.layers.size() &&
          model.output_shape == model.layers[model.outputs[0]].output_shape,
      "output shape");
  PSTRAIN_FUZZ_EXPECT(ParameterCount(model) >= 0, ParameterCount(model));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain::worker;  // NOLINT: a fuzz entry point.
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<ModelSpec> model = ParseKerasModel(json, /*seed=*/42);
  if (model.ok()) {
    CheckModel(*model);
    return 0;
  }
  const absl::Status& status = model.status();
  PSTRAIN_FUZZ_EXPECT(status.code() == absl::StatusCode::kInvalidArgument,
                      status.ToString());
  PSTRAIN_FUZZ_EXPECT(absl::StartsWith(status.message(), "model: "),
                      status.message());
  PSTRAIN_FUZZ_EXPECT(!absl::StrContains(status.message(), '\n'),
                      status.message());
  return 0;
}
