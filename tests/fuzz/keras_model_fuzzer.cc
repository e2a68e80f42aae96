// Fuzzes the Keras model JSON parser (worker/model/keras_model.h): the input
// is a model's JSON. Beyond not crashing, checks the header's promises: a
// failure is INVALID_ARGUMENT with one line starting "model: "; a success is
// a chain of layers whose shapes connect, with known positive dimensions,
// and variables that exist, fit in memory's address space and are counted
// by ParameterCount.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tensor.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/model/keras_model.h"

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
  std::vector<int64_t> shape = model.input_shape;
  for (const LayerSpec& layer : model.layers) {
    PSTRAIN_FUZZ_EXPECT(layer.input_shape == shape, layer.name, ": input ",
                        ShapeString(layer.input_shape), " after ",
                        ShapeString(shape));
    CheckShape(layer.output_shape, layer.name + " output");
    for (const std::string& name : layer.variables) {
      PSTRAIN_FUZZ_EXPECT(variables.count(name) == 1, layer.name,
                          " names unknown variable ", name);
    }
    shape = layer.output_shape;
  }
  PSTRAIN_FUZZ_EXPECT(model.output_shape == shape, "output shape");
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
