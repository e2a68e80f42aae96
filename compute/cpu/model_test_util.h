// Test helpers for backends: a model's variables and gradients as tensors,
// in the maps Backend::TrainStep takes.
//
//   ModelVariables vars = MakeVariables(spec, Init::kKeras);
//   backend->TrainStep(input, vars.weight_map, &vars.gradient_map);
//   vars.weights[0].data<float>()[3] += 1e-3f;
#ifndef PSTRAIN_COMPUTE_CPU_MODEL_TEST_UTIL_H_
#define PSTRAIN_COMPUTE_CPU_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "compute/backend.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {
namespace cpu {

enum class Init {
  kKeras,   // The variables' own initializers (ps/initializer.h).
  kRandom,  // Uniform in [-0.5, 0.5) (biases too), seeded.
};

struct ModelVariables {
  // spec.variables' order. The maps point into these vectors: do not resize.
  std::vector<Tensor> weights;
  std::vector<Tensor> gradients;
  Weights weight_map;
  Gradients gradient_map;
};

ModelVariables MakeVariables(const ModelSpec& spec, Init init,
                             uint32_t seed = 1);

// The spec parsed from `json` (ADD_FAILURE on error).
ModelSpec MustParse(const std::string& json, uint64_t seed = 1);

// Keras JSON for tests: a tf.keras 2.x Sequential model named "tiny" of
// `layers` on inputs [null, dims] (dims like "7, 7, 2"), and one layer of
// `class_name` with its config `fields` ("\"name\": \"dense\", ...").
std::string KerasModel(const std::string& dims,
                       const std::vector<std::string>& layers);
std::string KerasLayer(const std::string& class_name,
                       const std::string& fields);
// Keras JSON for tests of graphs: a tf.keras 2.x Functional model with an
// input "x" of [null, dims] (and "ids" of [null, id_dims] when given),
// then `layers` (entries of GraphLayer), the output the layer "out".
std::string GraphModel(const std::string& dims,
                       const std::vector<std::string>& layers,
                       const std::string& id_dims = "");
// Layer `name` of `class_name` with config fields `fields` (JSON members,
// may be empty), called once on the layers or inputs `reads`.
std::string GraphLayer(const std::string& class_name, const std::string& name,
                       const std::string& fields,
                       const std::vector<std::string>& reads);
// A Dense layer of `units` with `activation`, called on `reads`.
std::string GraphDense(const std::string& name, int units,
                       const std::string& reads,
                       const std::string& activation = "linear");

// A Dense or Conv2D field: an L2 kernel regularizer of 0.01.
inline constexpr char kL2Field[] =
    R"("kernel_regularizer": {"class_name": "L2", "config": {"l2": 0.01}})";

// Whether every element of every gradient is finite.
bool AllFinite(const std::vector<Tensor>& tensors);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_MODEL_TEST_UTIL_H_
