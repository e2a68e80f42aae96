// The layers beyond the core ones (normalization, pooling, reshaping,
// attention): what each reads from its config, and the message of each
// refusal.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

// A tf.keras 2.x Sequential model: an InputLayer of `dims` per example, then
// one layer of `class_name` with `config` (its name "l").
std::string OneLayer(const std::vector<int>& dims,
                     const std::string& class_name, Json config) {
  Json shape = Json::array({nullptr});
  for (int d : dims) shape.push_back(d);
  config["name"] = "l";
  return Json({{"class_name", "Sequential"},
               {"config",
                {{"name", "s"},
                 {"layers",
                  {{{"class_name", "InputLayer"},
                    {"config", {{"name", "in"}, {"batch_input_shape", shape}}}},
                   {{"class_name", class_name}, {"config", config}}}}}}})
      .dump();
}

ModelSpec MustParse(const std::string& json) {
  absl::StatusOr<ModelSpec> model = ParseKerasModel(json, 1);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : ModelSpec();
}

// "name [dims]" for each variable.
std::string Variables(const ModelSpec& model) {
  std::vector<std::string> parts;
  for (const VariableDef& v : model.variables) {
    parts.push_back(absl::StrCat(v.name(), " [",
                                 absl::StrJoin(v.shape().dims(), ","), "]"));
  }
  return absl::StrJoin(parts, "; ");
}

void ExpectError(const std::string& json, const std::string& message) {
  absl::StatusOr<ModelSpec> model = ParseKerasModel(json, 1);
  ASSERT_FALSE(model.ok()) << json;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(model.status().message()), message);
}

constexpr char kAt[] = "model: layer 1 'l' ";

TEST(KerasLayers, BatchNormalizationHasMovingAverages) {
  const ModelSpec model = MustParse(OneLayer(
      {4, 3}, "BatchNormalization", {{"momentum", 0.9}, {"epsilon", 0.01}}));
  EXPECT_EQ(Variables(model),
            "l/gamma [3]; l/beta [3]; l/moving_mean [3]; l/moving_variance [3]");
  EXPECT_FALSE(model.variables[0].has_moving_average());
  EXPECT_FLOAT_EQ(model.variables[2].moving_average().momentum(), 0.9f);
  EXPECT_FLOAT_EQ(model.variables[3].moving_average().momentum(), 0.9f);
  EXPECT_FLOAT_EQ(model.variables[3].initializer().constant().value(), 1);
  EXPECT_FLOAT_EQ(model.layers[0].epsilon, 0.01f);
  EXPECT_EQ(Variables(MustParse(OneLayer({3}, "BatchNormalization",
                                         {{"center", false},
                                          {"scale", false},
                                          {"axis", Json::array({-1})}}))),
            "l/moving_mean [3]; l/moving_variance [3]");

  const std::string at = std::string(kAt) + "(BatchNormalization): ";
  ExpectError(OneLayer({4, 3}, "BatchNormalization", {{"axis", 1}}),
              at + "axis 1 is not supported (expected -1, the last axis)");
  ExpectError(OneLayer({3}, "BatchNormalization", {{"momentum", 1.0}}),
              at + "momentum: 1 is out of range [0, 1)");
  ExpectError(OneLayer({3}, "BatchNormalization", {{"synchronized", true}}),
              at + "synchronized true is not supported (expected false)");
  ExpectError(OneLayer({3}, "BatchNormalization", {{"epsilon", 0}}),
              at + "epsilon: 0 is not > 0");
  ExpectError(OneLayer({3}, "LayerNormalization", {{"rms_scaling", true}}),
              std::string(kAt) +
                  "(LayerNormalization): rms_scaling true is not supported "
                  "(expected false)");
}

TEST(KerasLayers, PoolingPaddingAndReshapingShapes) {
  const auto output = [](const std::vector<int>& dims,
                         const std::string& class_name, Json config) {
    return MustParse(OneLayer(dims, class_name, std::move(config)))
        .output_shape;
  };
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(output({5, 5, 2}, "AveragePooling2D", Json::object()),
            (Shape{2, 2, 2}));
  EXPECT_EQ(output({5, 5, 2}, "AveragePooling2D",
                   {{"padding", "same"}, {"strides", 1}}),
            (Shape{5, 5, 2}));
  EXPECT_EQ(output({5, 4, 3}, "GlobalAveragePooling2D", Json::object()),
            (Shape{3}));
  EXPECT_EQ(output({5, 4, 3}, "GlobalMaxPooling2D", {{"keepdims", true}}),
            (Shape{1, 1, 3}));
  EXPECT_EQ(output({7, 3}, "GlobalMaxPooling1D", Json::object()), (Shape{3}));
  EXPECT_EQ(output({4, 4, 1}, "ZeroPadding2D",
                   {{"padding", Json::parse("[[1, 0], [2, 3]]")}}),
            (Shape{5, 9, 1}));
  EXPECT_EQ(output({4, 4, 1}, "ZeroPadding2D", Json::object()),
            (Shape{6, 6, 1}));
  EXPECT_EQ(output({4, 6}, "Reshape", {{"target_shape", {3, -1}}}),
            (Shape{3, 8}));
  EXPECT_EQ(output({2, 3, 4}, "Permute", {{"dims", {3, 1, 2}}}),
            (Shape{4, 2, 3}));

  ExpectError(OneLayer({4, 6}, "Reshape", {{"target_shape", {5, -1}}}),
              std::string(kAt) +
                  "(Reshape): target_shape: [5, -1] does not hold the input "
                  "[4, 6]'s 24 elements");
  ExpectError(OneLayer({2, 3}, "Permute", {{"dims", {1, 1}}}),
              std::string(kAt) +
                  "(Permute): dims: expected a permutation of 1..2, got "
                  "[1, 1]");
  ExpectError(OneLayer({4, 3}, "GlobalAveragePooling2D", Json::object()),
              std::string(kAt) +
                  "(GlobalAveragePooling2D): expects an input of rank 3 "
                  "[height, width, channels], got [4, 3]");
  ExpectError(OneLayer({4, 4, 1}, "ZeroPadding2D", {{"padding", -1}}),
              std::string(kAt) +
                  "(ZeroPadding2D): padding: expected a non-negative integer "
                  "or a list of two, got -1");
  ExpectError(OneLayer({3}, "Rescaling", Json::object()),
              std::string(kAt) + "(Rescaling): scale: missing");
}

// MultiHeadAttention's variables as Keras 3 names and shapes them, and what
// it refuses.
TEST(KerasLayers, MultiHeadAttention) {
  const auto model = [](Json config, Json kwargs = Json::object()) {
    config["name"] = "mha";
    Json node = {{"x", 0, 0, kwargs}};
    if (!kwargs.contains("value")) node.push_back({"x", 0, 0, Json::object()});
    return Json({{"class_name", "Model"},
                 {"config",
                  {{"name", "m"},
                   {"layers",
                    {{{"class_name", "InputLayer"},
                      {"name", "x"},
                      {"config",
                       {{"name", "x"},
                        {"batch_input_shape", {nullptr, 5, 6}}}},
                      {"inbound_nodes", Json::array()}},
                     {{"class_name", "MultiHeadAttention"},
                      {"name", "mha"},
                      {"config", config},
                      {"inbound_nodes", {node}}}}},
                   {"input_layers", {{"x", 0, 0}}},
                   {"output_layers", {{"mha", 0, 0}}}}}})
        .dump();
  };
  const ModelSpec spec =
      MustParse(model({{"num_heads", 2}, {"key_dim", 3}, {"value_dim", 4},
                       {"output_shape", 7}},
                      {{"value", {"x", 0, 0}}, {"use_causal_mask", true}}));
  EXPECT_EQ(Variables(spec),
            "mha/query/kernel [6,2,3]; mha/query/bias [2,3]; "
            "mha/key/kernel [6,2,3]; mha/key/bias [2,3]; "
            "mha/value/kernel [6,2,4]; mha/value/bias [2,4]; "
            "mha/attention_output/kernel [2,4,7]; "
            "mha/attention_output/bias [7]");
  EXPECT_TRUE(spec.layers[0].causal);
  EXPECT_EQ(spec.layers[0].inputs.size(), 2u);
  EXPECT_EQ(spec.output_shape, (std::vector<int64_t>{5, 7}));

  const std::string at = "model: layer 1 'mha' (MultiHeadAttention): ";
  ExpectError(model({{"num_heads", 2}, {"key_dim", 3}, {"dropout", 0.1}}),
              at + "dropout 0.1 is not supported (expected 0: attention "
                   "dropout is not computed)");
  ExpectError(
      model({{"num_heads", 2}, {"key_dim", 3}, {"attention_axes", {2}}}),
      at + "attention_axes [2] is not supported (expected null, the sequence "
           "axis)");
  ExpectError(model({{"num_heads", 2}, {"key_dim", 3}},
                    {{"value", {"x", 0, 0}}, {"return_attention_scores", true}}),
              at + "inbound_nodes[0][0][3].return_attention_scores: true is "
                   "not supported (expected a query, value or key tensor, "
                   "use_causal_mask, or null)");
  ExpectError(model({{"key_dim", 3}}), at + "num_heads: missing");
  ExpectError(model({{"num_heads", 2}, {"key_dim", 3}, {"use_gate", true}}),
              at + "use_gate true is not supported (expected false)");
  ExpectError(
      model({{"num_heads", 2}, {"key_dim", 3}, {"sliding_window", 4}}),
      at + "sliding_window 4 is not supported (expected null)");
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
