#include "compute/cpu/model_test_util.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"
#include "ps/initializer.h"

namespace pstrain {
namespace worker {
namespace cpu {

ModelVariables MakeVariables(const ModelSpec& spec, Init init, uint32_t seed) {
  ModelVariables vars;
  for (const VariableDef& def : spec.variables) {
    std::vector<int64_t> shape(def.shape().dims().begin(),
                               def.shape().dims().end());
    absl::StatusOr<Tensor> w = Tensor::Create(DT_FLOAT, shape);
    absl::StatusOr<Tensor> g = Tensor::Create(DT_FLOAT, shape);
    EXPECT_TRUE(w.ok() && g.ok()) << def.name();
    if (init == Init::kKeras) {
      EXPECT_TRUE(ps::CheckInitializer(def).ok()) << def.name();
      ps::FillRows(def, 0, shape.empty() ? 1 : shape[0], w->data<float>());
    } else {
      const std::vector<float> values =
          RandomFloats(w->num_elements(), seed++, -0.5f, 0.5f);
      std::copy(values.begin(), values.end(), w->data<float>());
    }
    vars.weights.push_back(std::move(*w));
    vars.gradients.push_back(std::move(*g));
  }
  for (size_t i = 0; i < spec.variables.size(); ++i) {
    vars.weight_map[spec.variables[i].name()] = &vars.weights[i];
    vars.gradient_map[spec.variables[i].name()] = &vars.gradients[i];
  }
  return vars;
}

ModelSpec MustParse(const std::string& json, uint64_t seed) {
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(json, seed);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? std::move(*spec) : ModelSpec();
}

bool AllFinite(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    for (float v : t.flat<float>()) {
      if (!std::isfinite(v)) return false;
    }
  }
  return true;
}

std::string KerasModel(const std::string& dims,
                       const std::vector<std::string>& layers) {
  return absl::StrCat(
      R"({"class_name": "Sequential", "config": {"name": "tiny", "layers": [)",
      R"({"class_name": "InputLayer", "config": {"name": "input", )",
      R"("batch_input_shape": [null, )", dims, "]}}, ",
      absl::StrJoin(layers, ", "), "]}}");
}

std::string KerasLayer(const std::string& class_name,
                       const std::string& fields) {
  return absl::StrCat(R"({"class_name": ")", class_name, R"(", "config": {)",
                      fields, "}}");
}

namespace {

std::string GraphInput(const std::string& name, const std::string& dims) {
  return absl::StrCat(R"({"class_name": "InputLayer", "name": ")", name,
                      R"(", "inbound_nodes": [], "config": {"name": ")", name,
                      R"(", "batch_input_shape": [null, )", dims, "]}}");
}

}  // namespace

std::string GraphModel(const std::string& dims,
                       const std::vector<std::string>& layers,
                       const std::string& id_dims) {
  std::string inputs = GraphInput("x", dims);
  std::string input_layers = R"(["x", 0, 0])";
  if (!id_dims.empty()) {
    absl::StrAppend(&inputs, ", ", GraphInput("ids", id_dims));
    absl::StrAppend(&input_layers, R"(, ["ids", 0, 0])");
  }
  return absl::StrCat(
      R"({"class_name": "Model", "config": {"name": "m", "layers": [)", inputs,
      ", ", absl::StrJoin(layers, ", "), R"(], "input_layers": [)",
      input_layers, R"(], "output_layers": [["out", 0, 0]]}})");
}

std::string GraphLayer(const std::string& class_name, const std::string& name,
                       const std::string& fields,
                       const std::vector<std::string>& reads) {
  std::vector<std::string> node;
  for (const std::string& r : reads) {
    node.push_back(absl::StrCat("[\"", r, "\", 0, 0, {}]"));
  }
  return absl::StrCat(
      R"({"class_name": ")", class_name, R"(", "name": ")", name,
      R"(", "config": {"name": ")", name, "\"", fields.empty() ? "" : ", ",
      fields, R"(}, "inbound_nodes": [[)", absl::StrJoin(node, ", "), "]]}");
}

std::string GraphDense(const std::string& name, int units,
                       const std::string& reads,
                       const std::string& activation) {
  return GraphLayer("Dense", name,
                    absl::StrCat(R"("units": )", units, R"(, "activation": ")",
                                 activation, "\""),
                    {reads});
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
