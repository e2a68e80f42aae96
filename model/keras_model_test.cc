#include "model/keras_model.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/derived_seed.h"
#include "common/tensor.h"
#include "gtest/gtest.h"
#include "model/shipped/shipped_models.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kSeed = 42;
constexpr char kCnnKeras2[] = "model/shipped/testdata/cnn_keras2.json";
constexpr char kMlpKeras2[] = "model/shipped/testdata/mlp_keras2.json";
// The end of the message refusing an unknown layer class.
constexpr char kSupportedLayers[] =
    "is not supported (supported: InputLayer, Conv2D, DepthwiseConv2D, "
    "Conv1D, MaxPooling2D, Flatten, Dense, Dropout, Embedding, Activation, "
    "ReLU, LeakyReLU, ELU, Softmax, "
    "Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate, "
    "BatchNormalization, LayerNormalization, AveragePooling2D, "
    "GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalMaxPooling1D, "
    "GlobalMaxPooling2D, ZeroPadding2D, Reshape, Permute, Rescaling, "
    "MultiHeadAttention)";
constexpr char kSupportedActivations[] =
    "is not supported (supported: linear, relu, relu6, leaky_relu, softmax, "
    "log_softmax, gelu, gelu_new, sigmoid, hard_sigmoid, tanh, silu, swish, "
    "elu, selu, "
    "softplus)";

// ---------------------------------------------------------------------------
// Building and checking models.

// A tf.keras 2.x-style Sequential model of `layers` (JSON objects).
std::string Sequential(std::initializer_list<std::string> layers) {
  return absl::StrCat(
      R"({"class_name": "Sequential", "config": {"name": "sequential", )",
      R"("layers": [)", absl::StrJoin(layers, ", "), "]}}");
}

// An InputLayer of batch_input_shape [null, <dims>].
std::string Input(const std::string& dims) {
  return absl::StrCat(R"({"class_name": "InputLayer", "config": {)",
                      R"("name": "input", "batch_input_shape": [null, )", dims,
                      "]}}");
}

// A layer of `class_name` whose config holds `fields` (JSON members).
std::string Layer(const std::string& class_name, const std::string& fields) {
  return absl::StrCat(R"({"class_name": ")", class_name, R"(", "config": {)",
                      fields, "}}");
}

std::string ShippedJson(absl::string_view name) {
  for (const ShippedModel& model : ShippedModels()) {
    if (model.name == name) return std::string(model.json);
  }
  ADD_FAILURE() << "no shipped model " << name;
  return "";
}

// `json` after `edit` changed its parsed form.
std::string Edit(const std::string& json,
                 const std::function<void(Json&)>& edit) {
  Json model = Json::parse(json);
  edit(model);
  return model.dump();
}

// The config of layer `index` of a parsed model.
Json& LayerConfig(Json& model, int index) {
  return model["config"]["layers"][index]["config"];
}

ModelSpec MustParse(const std::string& json, uint64_t seed = kSeed) {
  absl::StatusOr<ModelSpec> model = ParseKerasModel(json, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : ModelSpec();
}

ModelSpec MustLoad(const std::string& name, uint64_t seed = kSeed) {
  absl::StatusOr<ModelSpec> model = LoadModel(name, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : ModelSpec();
}

// Expects `json` to be refused with INVALID_ARGUMENT and exactly `message`.
void ExpectError(const std::string& json, const std::string& message) {
  absl::StatusOr<ModelSpec> model = ParseKerasModel(json, kSeed);
  ASSERT_FALSE(model.ok()) << json;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(model.status().message()), message) << json;
}

std::vector<std::vector<int64_t>> OutputShapes(const ModelSpec& model) {
  std::vector<std::vector<int64_t>> shapes;
  for (const LayerSpec& layer : model.layers) {
    shapes.push_back(layer.output_shape);
  }
  return shapes;
}

std::vector<LayerKind> Kinds(const ModelSpec& model) {
  std::vector<LayerKind> kinds;
  for (const LayerSpec& layer : model.layers) kinds.push_back(layer.kind);
  return kinds;
}

// "conv2d/kernel [3, 3, 1, 32]" for each variable.
std::vector<std::string> Variables(const ModelSpec& model) {
  std::vector<std::string> variables;
  for (const VariableDef& v : model.variables) {
    variables.push_back(
        absl::StrCat(v.name(), " ",
                     ShapeString(std::vector<int64_t>(
                         v.shape().dims().begin(), v.shape().dims().end()))));
  }
  return variables;
}

// Every field of `layer`, to compare layers with one readable diff.
std::string Describe(const LayerSpec& l) {
  return absl::StrCat(
      l.name, " kind=", static_cast<int>(l.kind),
      " in=", ShapeString(l.input_shape), " out=", ShapeString(l.output_shape),
      " filters=", l.filters, " kernel=", l.kernel_h, "x", l.kernel_w,
      " strides=", l.stride_h, "x", l.stride_w, " same=", l.same_padding,
      " units=", l.units, " activation=", static_cast<int>(l.activation),
      " dilation=", l.dilation_h, "x", l.dilation_w, " groups=", l.groups,
      " depthwise=", l.depthwise, " causal=", l.causal_padding,
      " use_bias=", l.use_bias, " kernel_l1=", l.kernel_regularizer.l1,
      " kernel_l2=", l.kernel_regularizer.l2,
      " bias_l1=", l.bias_regularizer.l1, " bias_l2=", l.bias_regularizer.l2,
      " rate=", l.rate, " input_dim=", l.input_dim,
      " output_dim=", l.output_dim,
      " variables=", absl::StrJoin(l.variables, ","));
}

std::string Describe(const ModelSpec& model) {
  std::vector<std::string> parts = {
      absl::StrCat("name=", model.name, " in=", ShapeString(model.input_shape),
                   " dtype=", DataTypeName(model.input_dtype),
                   " out=", ShapeString(model.output_shape))};
  for (const LayerSpec& layer : model.layers) parts.push_back(Describe(layer));
  for (const VariableDef& v : model.variables) {
    parts.push_back(v.ShortDebugString());
  }
  return absl::StrJoin(parts, "\n");
}

const VariableDef* FindVariable(const ModelSpec& model,
                                const std::string& name) {
  for (const VariableDef& v : model.variables) {
    if (v.name() == name) return &v;
  }
  ADD_FAILURE() << "no variable " << name;
  return nullptr;
}

// ---------------------------------------------------------------------------
// The shipped models.

TEST(KerasModel, LoadsShippedCnn) {
  const ModelSpec model = MustLoad("cnn");
  EXPECT_EQ(model.name, "sequential");
  EXPECT_EQ(model.input_shape, (std::vector<int64_t>{28, 28, 1}));
  EXPECT_EQ(model.input_dtype, DT_FLOAT);
  EXPECT_EQ(Kinds(model),
            (std::vector<LayerKind>{LayerKind::kConv2D, LayerKind::kMaxPool2D,
                                    LayerKind::kConv2D, LayerKind::kMaxPool2D,
                                    LayerKind::kFlatten, LayerKind::kDense,
                                    LayerKind::kDense}));
  EXPECT_EQ(OutputShapes(model),
            (std::vector<std::vector<int64_t>>{{26, 26, 32},
                                               {13, 13, 32},
                                               {11, 11, 64},
                                               {5, 5, 64},
                                               {1600},
                                               {64},
                                               {10}}));
  EXPECT_EQ(model.output_shape, (std::vector<int64_t>{10}));
  EXPECT_EQ(Variables(model), (std::vector<std::string>{
                                  "conv2d/kernel [3, 3, 1, 32]",
                                  "conv2d/bias [32]",
                                  "conv2d_1/kernel [3, 3, 32, 64]",
                                  "conv2d_1/bias [64]",
                                  "dense/kernel [1600, 64]",
                                  "dense/bias [64]",
                                  "dense_1/kernel [64, 10]",
                                  "dense_1/bias [10]",
                              }));
  // 320 + 18496 + 102464 + 650.
  EXPECT_EQ(ParameterCount(model), 121930);

  const LayerSpec& conv = model.layers[0];
  EXPECT_EQ(conv.name, "conv2d");
  EXPECT_EQ(conv.filters, 32);
  EXPECT_EQ(conv.kernel_h, 3);
  EXPECT_EQ(conv.kernel_w, 3);
  EXPECT_EQ(conv.stride_h, 1);
  EXPECT_EQ(conv.stride_w, 1);
  EXPECT_FALSE(conv.same_padding);
  EXPECT_EQ(conv.activation, Activation::kRelu);
  EXPECT_TRUE(conv.use_bias);
  EXPECT_EQ(conv.variables,
            (std::vector<std::string>{"conv2d/kernel", "conv2d/bias"}));
  const LayerSpec& pool = model.layers[1];
  EXPECT_EQ(pool.kernel_h, 2);
  EXPECT_EQ(pool.kernel_w, 2);
  EXPECT_EQ(pool.stride_h, 2);
  EXPECT_EQ(pool.stride_w, 2);
  EXPECT_TRUE(pool.variables.empty());
  EXPECT_EQ(model.layers[5].units, 64);
  EXPECT_EQ(model.layers[5].activation, Activation::kRelu);
  EXPECT_EQ(model.layers[6].units, 10);
  EXPECT_EQ(model.layers[6].activation, Activation::kLinear);
  // The tutorial's L2(1e-5) on every kernel.
  for (const int i : {0, 2, 5, 6}) {
    EXPECT_EQ(model.layers[i].kernel_regularizer.l2, 1e-5f)
        << model.layers[i].name;
    EXPECT_EQ(model.layers[i].kernel_regularizer.l1, 0.0f)
        << model.layers[i].name;
    EXPECT_FALSE(model.layers[i].bias_regularizer.active())
        << model.layers[i].name;
  }
  for (const VariableDef& v : model.variables) {
    EXPECT_EQ(v.dtype(), DT_FLOAT) << v.name();
    EXPECT_FALSE(v.sparse()) << v.name();
    EXPECT_EQ(v.initializer().kind_case(), v.shape().dims_size() == 1
                                               ? Initializer::kZeros
                                               : Initializer::kGlorotUniform)
        << v.name();
  }
}

TEST(KerasModel, LoadsShippedMlp) {
  const ModelSpec model = MustLoad("mlp");
  EXPECT_EQ(model.input_shape, (std::vector<int64_t>{28, 28}));
  EXPECT_EQ(Kinds(model),
            (std::vector<LayerKind>{LayerKind::kFlatten, LayerKind::kDense,
                                    LayerKind::kDropout, LayerKind::kDense}));
  EXPECT_EQ(OutputShapes(model),
            (std::vector<std::vector<int64_t>>{{784}, {200}, {200}, {10}}));
  EXPECT_EQ(Variables(model), (std::vector<std::string>{
                                  "dense/kernel [784, 200]",
                                  "dense_1/kernel [200, 10]",
                                  "dense_1/bias [10]",
                              }));
  EXPECT_EQ(ParameterCount(model), 158810);
  EXPECT_EQ(model.layers[1].activation, Activation::kRelu);
  EXPECT_FALSE(model.layers[1].use_bias);
  EXPECT_EQ(model.layers[1].variables,
            (std::vector<std::string>{"dense/kernel"}));
  EXPECT_EQ(model.layers[2].rate, 0.4f);
  EXPECT_EQ(model.layers[3].activation, Activation::kSoftmax);
  for (const LayerSpec& layer : model.layers) {
    EXPECT_FALSE(layer.kernel_regularizer.active()) << layer.name;
  }
}

TEST(KerasModel, ShipsCnnAndMlpSortedByName) {
  std::vector<std::string> names;
  for (const ShippedModel& model : ShippedModels()) {
    names.emplace_back(model.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cnn", "mlp"}));
  EXPECT_EQ(Describe(MustLoad("cnn")), Describe(MustParse(ShippedJson("cnn"))));
}

TEST(KerasModel, Keras2AndKeras3FormsGiveEqualModels) {
  EXPECT_EQ(Describe(MustLoad(kCnnKeras2)), Describe(MustLoad("cnn")));
  EXPECT_EQ(Describe(MustLoad(kMlpKeras2)), Describe(MustLoad("mlp")));
}

// ---------------------------------------------------------------------------
// Where the input shape comes from.

// Older tf.keras writes no InputLayer: the first layer carries the shape.
TEST(KerasModel, ReadsInputShapeFromFirstLayer) {
  const ModelSpec expected = MustLoad("mlp");
  const std::string no_input_layer = Edit(ShippedJson("mlp"), [](Json& m) {
    Json& layers = m["config"]["layers"];
    layers.erase(layers.begin());
    layers[0]["config"]["batch_input_shape"] = Json::parse("[null, 28, 28]");
    m["config"].erase("build_input_shape");
  });
  EXPECT_EQ(Describe(MustParse(no_input_layer)), Describe(expected));
}

// A Keras 3 model built without an Input: only build_input_shape has it.
TEST(KerasModel, ReadsInputShapeFromBuildInputShape) {
  const std::string no_input_layer = Edit(ShippedJson("cnn"), [](Json& m) {
    Json& layers = m["config"]["layers"];
    layers.erase(layers.begin());
  });
  EXPECT_EQ(Describe(MustParse(no_input_layer)), Describe(MustLoad("cnn")));
}

// ---------------------------------------------------------------------------
// Seeds and initializers.

TEST(KerasModel, SeedsDeriveFromRunSeedAndVariableName) {
  const ModelSpec a = MustLoad("cnn", 7);
  const ModelSpec b = MustLoad("cnn", 7);
  const ModelSpec c = MustLoad("cnn", 8);
  ASSERT_EQ(a.variables.size(), 8u);
  std::set<uint64_t> seeds;
  for (size_t i = 0; i < a.variables.size(); ++i) {
    const std::string& name = a.variables[i].name();
    EXPECT_EQ(a.variables[i].initializer().seed(), DeriveSeed(7, name));
    EXPECT_EQ(a.variables[i].SerializeAsString(),
              b.variables[i].SerializeAsString());
    EXPECT_NE(a.variables[i].initializer().seed(),
              c.variables[i].initializer().seed());
    seeds.insert(a.variables[i].initializer().seed());
  }
  EXPECT_EQ(seeds.size(), a.variables.size());
}

TEST(KerasModel, IgnoresKerasInitializerSeed) {
  const std::string seeded = Edit(ShippedJson("cnn"), [](Json& m) {
    LayerConfig(m, 1)["kernel_initializer"]["config"]["seed"] = 1234;
  });
  EXPECT_EQ(Describe(MustParse(seeded)), Describe(MustLoad("cnn")));
}

TEST(KerasModel, MapsKerasInitializers) {
  const ModelSpec model = MustParse(Sequential({
      Input("4"),
      Layer("Dense", R"("name": "uniform", "units": 3,
        "kernel_initializer": {"class_name": "RandomUniform",
                               "config": {"minval": -0.1, "maxval": 0.2}},
        "bias_initializer": {"class_name": "Constant",
                             "config": {"value": 0.5}})"),
      Layer("Dense", R"("name": "normal", "units": 2,
        "kernel_initializer": {"module": "keras.initializers",
                               "class_name": "TruncatedNormal",
                               "config": {"mean": 0.1, "stddev": 0.02,
                                          "seed": null},
                               "registered_name": null},
        "bias_initializer": "zeros")"),
      Layer("Dense", R"("name": "defaults", "units": 1,
        "kernel_initializer": {"class_name": "RandomUniform", "config": {}},
        "bias_initializer": null)"),
  }));
  const Initializer& uniform =
      FindVariable(model, "uniform/kernel")->initializer();
  ASSERT_EQ(uniform.kind_case(), Initializer::kRandomUniform);
  EXPECT_EQ(uniform.random_uniform().minval(), -0.1f);
  EXPECT_EQ(uniform.random_uniform().maxval(), 0.2f);
  const Initializer& constant =
      FindVariable(model, "uniform/bias")->initializer();
  ASSERT_EQ(constant.kind_case(), Initializer::kConstant);
  EXPECT_EQ(constant.constant().value(), 0.5f);
  const Initializer& normal =
      FindVariable(model, "normal/kernel")->initializer();
  ASSERT_EQ(normal.kind_case(), Initializer::kTruncatedNormal);
  EXPECT_EQ(normal.truncated_normal().mean(), 0.1f);
  EXPECT_EQ(normal.truncated_normal().stddev(), 0.02f);
  EXPECT_EQ(FindVariable(model, "normal/bias")->initializer().kind_case(),
            Initializer::kZeros);
  // Keras's defaults: RandomUniform(-0.05, 0.05); null means the default.
  const Initializer& defaults =
      FindVariable(model, "defaults/kernel")->initializer();
  EXPECT_EQ(defaults.random_uniform().minval(), -0.05f);
  EXPECT_EQ(defaults.random_uniform().maxval(), 0.05f);
  EXPECT_EQ(FindVariable(model, "defaults/bias")->initializer().kind_case(),
            Initializer::kZeros);
  EXPECT_EQ(normal.seed(), DeriveSeed(kSeed, "normal/kernel"));
}

// ---------------------------------------------------------------------------
// Layers and shapes.

TEST(KerasModel, ComputesSamePaddingAndStridedShapes) {
  const ModelSpec model = MustParse(Sequential({
      Input("28, 28, 3"),
      Layer("Conv2D", R"("name": "same", "filters": 8, "kernel_size": 3,
                         "strides": 2, "padding": "same")"),
      Layer("Conv2D", R"("name": "valid", "filters": 4, "kernel_size": [5, 3],
                         "strides": [2, 1], "activation": null)"),
      Layer("MaxPooling2D", R"("name": "pool_same", "pool_size": [3, 3],
                               "strides": [2, 2], "padding": "same")"),
      Layer("MaxPooling2D", R"("name": "pool_default", "strides": null)"),
  }));
  EXPECT_EQ(OutputShapes(model),
            (std::vector<std::vector<int64_t>>{
                {14, 14, 8},   // ceil(28 / 2)
                {5, 12, 4},    // (14 - 5) / 2 + 1, 14 - 3 + 1
                {3, 6, 4},     // ceil(5 / 2), ceil(12 / 2)
                {1, 3, 4}}));  // 2x2 pool, strides 2
  EXPECT_EQ(Variables(model), (std::vector<std::string>{
                                  "same/kernel [3, 3, 3, 8]",
                                  "same/bias [8]",
                                  "valid/kernel [5, 3, 8, 4]",
                                  "valid/bias [4]",
                              }));
  EXPECT_TRUE(model.layers[0].same_padding);
  EXPECT_EQ(model.layers[0].stride_h, 2);
  EXPECT_EQ(model.layers[0].stride_w, 2);
  EXPECT_FALSE(model.layers[1].same_padding);
  EXPECT_EQ(model.layers[1].kernel_h, 5);
  EXPECT_EQ(model.layers[1].kernel_w, 3);
  EXPECT_EQ(model.layers[1].stride_h, 2);
  EXPECT_EQ(model.layers[1].stride_w, 1);
  EXPECT_EQ(model.layers[1].activation, Activation::kLinear);
  EXPECT_EQ(model.layers[3].kernel_h, 2);
  EXPECT_EQ(model.layers[3].stride_h, 2);
}

// A Keras 3 layer object: module, registered_name, the config's dtype
// policy, as Keras 3's to_json writes them.
std::string Keras3Layer(const std::string& class_name,
                        const std::string& fields) {
  return absl::StrCat(
      R"({"module": "keras.layers", "class_name": ")", class_name,
      R"(", "registered_name": null, "config": {"dtype": {"module": "keras",
         "class_name": "DTypePolicy", "config": {"name": "float32"},
         "registered_name": null}, )",
      fields, "}}");
}

// The same convolutions as Keras 3 and as tf.keras 2.x write them.
TEST(KerasModel, ReadsDilatedDepthwiseAndOneDimensionalConvolutions) {
  const std::string l1 = R"({"module": "keras.regularizers",
      "class_name": "L1", "config": {"l1": 0.01}, "registered_name": null})";
  const std::string l1l2 = R"({"module": "keras.regularizers",
      "class_name": "L1L2", "config": {"l1": 0.002, "l2": 0.003},
      "registered_name": null})";
  const std::string keras3 = absl::StrCat(
      R"({"module": "keras", "class_name": "Sequential",
          "registered_name": null, "config": {"name": "sequential",
          "layers": [{"module": "keras.layers", "class_name": "InputLayer",
            "registered_name": null, "config": {"name": "input",
            "batch_shape": [null, 12, 10, 3], "dtype": "float32"}}, )",
      Keras3Layer("Conv2D",
                  absl::StrCat(R"("name": "dilated", "filters": 4,
          "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid",
          "data_format": "channels_last", "dilation_rate": [2, 3],
          "groups": 1, "activation": "relu", "use_bias": true,
          "kernel_regularizer": )",
                               l1, R"(, "bias_regularizer": )", l1l2)),
      ", ",
      Keras3Layer("DepthwiseConv2D", absl::StrCat(R"("name": "depthwise",
          "kernel_size": [3, 3], "strides": [1, 1], "padding": "same",
          "data_format": "channels_last", "dilation_rate": [2, 2],
          "depth_multiplier": 2, "activation": "linear", "use_bias": true,
          "depthwise_initializer": {"module": "keras.initializers",
            "class_name": "HeNormal", "config": {"seed": null},
            "registered_name": null},
          "bias_initializer": {"module": "keras.initializers",
            "class_name": "Zeros", "config": {}, "registered_name": null},
          "depthwise_regularizer": )",
                                                  l1l2,
                                                  R"(, "bias_regularizer": null,
          "activity_regularizer": null, "depthwise_constraint": null,
          "bias_constraint": null)")),
      ", ",
      Keras3Layer("Reshape", R"("name": "steps", "target_shape": [32, 8])"),
      ", ", Keras3Layer("Conv1D", R"("name": "causal", "filters": 5,
          "kernel_size": [3], "strides": [1], "padding": "causal",
          "data_format": "channels_last", "dilation_rate": [4], "groups": 1,
          "activation": "tanh", "use_bias": false)"),
      ", ", Keras3Layer("Conv1D", R"("name": "strided", "filters": 2,
          "kernel_size": [4], "strides": [3], "padding": "same",
          "dilation_rate": [1], "groups": 1)"),
      "]}}");
  const std::string keras2 = Sequential({
      Input("12, 10, 3"),
      Layer("Conv2D", R"("name": "dilated", "filters": 4, "kernel_size": 3,
          "dilation_rate": [2, 3], "activation": "relu",
          "kernel_regularizer": {"class_name": "L1", "config": {"l1": 0.01}},
          "bias_regularizer": {"class_name": "L1L2",
                               "config": {"l1": 0.002, "l2": 0.003}})"),
      Layer("DepthwiseConv2D", R"("name": "depthwise", "kernel_size": 3,
          "padding": "same", "dilation_rate": 2, "depth_multiplier": 2,
          "depthwise_initializer": {"class_name": "HeNormal",
                                    "config": {"seed": null}},
          "depthwise_regularizer": {"class_name": "L1L2",
                                    "config": {"l1": 0.002, "l2": 0.003}})"),
      Layer("Reshape", R"("name": "steps", "target_shape": [32, 8])"),
      Layer("Conv1D", R"("name": "causal", "filters": 5, "kernel_size": 3,
          "padding": "causal", "dilation_rate": 4, "activation": "tanh",
          "use_bias": false)"),
      Layer("Conv1D", R"("name": "strided", "filters": 2, "kernel_size": 4,
          "strides": 3, "padding": "same")"),
  });
  const ModelSpec model = MustParse(keras3);
  EXPECT_EQ(Describe(model), Describe(MustParse(keras2)));
  EXPECT_EQ(Variables(model), Variables(MustParse(keras2)));
  EXPECT_EQ(OutputShapes(model),
            (std::vector<std::vector<int64_t>>{
                {8, 4, 4},   // 12 - 5 + 1, 10 - 7 + 1 (extents 5, 7)
                {8, 4, 8},   // same; 4 channels times 2
                {32, 8},     // reshaped to [steps, channels]
                {32, 5},     // causal: as many steps
                {11, 2}}));  // ceil(32 / 3)
  EXPECT_EQ(Variables(model), (std::vector<std::string>{
                                  "dilated/kernel [3, 3, 3, 4]",
                                  "dilated/bias [4]",
                                  "depthwise/depthwise_kernel [3, 3, 4, 2]",
                                  "depthwise/bias [8]",
                                  "causal/kernel [3, 8, 5]",
                                  "strided/kernel [4, 5, 2]",
                                  "strided/bias [2]",
                              }));
  const LayerSpec& dilated = model.layers[0];
  EXPECT_EQ(dilated.kind, LayerKind::kConv2D);
  EXPECT_EQ(dilated.dilation_h, 2);
  EXPECT_EQ(dilated.dilation_w, 3);
  EXPECT_EQ(dilated.groups, 1);
  EXPECT_EQ(dilated.kernel_regularizer.l1, 0.01f);
  EXPECT_EQ(dilated.kernel_regularizer.l2, 0.0f);
  EXPECT_EQ(dilated.bias_regularizer.l1, 0.002f);
  EXPECT_EQ(dilated.bias_regularizer.l2, 0.003f);
  const LayerSpec& depthwise = model.layers[1];
  EXPECT_EQ(depthwise.kind, LayerKind::kConv2D);
  EXPECT_TRUE(depthwise.depthwise);
  EXPECT_EQ(depthwise.groups, 4);
  EXPECT_EQ(depthwise.filters, 8);
  EXPECT_TRUE(depthwise.same_padding);
  EXPECT_EQ(depthwise.kernel_regularizer.l2, 0.003f);
  EXPECT_FALSE(depthwise.bias_regularizer.active());
  EXPECT_EQ(model.variables[2].initializer().kind_case(),
            Initializer::kVarianceScaling);
  const LayerSpec& causal = model.layers[3];
  EXPECT_TRUE(causal.causal_padding);
  EXPECT_FALSE(causal.same_padding);
  EXPECT_EQ(causal.kernel_h, 1);
  EXPECT_EQ(causal.kernel_w, 3);
  EXPECT_EQ(causal.dilation_w, 4);
  EXPECT_EQ(causal.activation, Activation::kTanh);
  EXPECT_EQ(model.layers[4].stride_w, 3);
  EXPECT_TRUE(model.layers[4].same_padding);
}

// Keras's defaults: depth_multiplier 1, L1 0.01, L2 0.01, L1L2 0 and 0.
TEST(KerasModel, AppliesDepthwiseAndRegularizerDefaults) {
  const ModelSpec model = MustParse(Sequential({
      Input("5, 5, 3"),
      Layer("DepthwiseConv2D", R"("name": "dw", "kernel_size": 2,
          "depthwise_regularizer": "l1", "bias_regularizer": "L2")"),
      Layer("Flatten", R"("name": "f")"),
      Layer("Dense", R"("name": "d", "units": 2,
          "kernel_regularizer": {"class_name": "L1L2", "config": {}})"),
  }));
  EXPECT_EQ(model.layers[0].output_shape, (std::vector<int64_t>{4, 4, 3}));
  EXPECT_EQ(model.layers[0].kernel_regularizer.l1, 0.01f);
  EXPECT_EQ(model.layers[0].bias_regularizer.l2, 0.01f);
  EXPECT_FALSE(model.layers[2].kernel_regularizer.active());
  EXPECT_EQ(Variables(model)[0], "dw/depthwise_kernel [2, 2, 3, 1]");
}

TEST(KerasModel, RefusesConvolutionOptionsItCannotCompute) {
  const auto image = [](const std::string& class_name,
                        const std::string& fields) {
    return Sequential(
        {Input("8, 8, 2"),
         Layer(class_name, absl::StrCat(R"("name": "c", )", fields))});
  };
  const auto steps = [](const std::string& fields) {
    return Sequential(
        {Input("9, 2"),
         Layer("Conv1D",
               absl::StrCat(R"("name": "c", "filters": 2, )", fields))});
  };
  const std::string conv = "model: layer 1 'c' (Conv2D): ";
  const std::string depthwise = "model: layer 1 'c' (DepthwiseConv2D): ";
  const std::string one_d = "model: layer 1 'c' (Conv1D): ";
  ExpectError(image("Conv2D", R"("filters": 2, "kernel_size": 3,
                                 "strides": 2, "dilation_rate": 2)"),
              conv +
                  "strides [2, 2] with dilation_rate [2, 2] is not "
                  "supported (Keras refuses strides > 1 together with "
                  "dilation_rate > 1)");
  ExpectError(image("Conv2D", R"("filters": 2, "kernel_size": 3,
                                 "dilation_rate": 4)"),
              conv +
                  "kernel_size [3, 3] with dilation_rate [4, 4] does not "
                  "fit the input [8, 8, 2] with padding \"valid\"");
  ExpectError(image("Conv2D", R"("filters": 2, "kernel_size": 3,
                                 "padding": "causal")"),
              conv +
                  "padding \"causal\" is not supported (expected "
                  "\"valid\" or \"same\")");
  ExpectError(image("DepthwiseConv2D", R"("kernel_size": 3,
                                          "strides": [1, 2],
                                          "dilation_rate": [2, 1])"),
              depthwise +
                  "strides [1, 2] with dilation_rate [2, 1] is not "
                  "supported (Keras refuses strides > 1 together "
                  "with dilation_rate > 1)");
  ExpectError(image("DepthwiseConv2D", R"("kernel_size": 3,
                                          "depth_multiplier": 0)"),
              depthwise +
                  "depth_multiplier: 0 is out of range [1, "
                  "2147483647]");
  ExpectError(image("DepthwiseConv2D", R"("kernel_size": 3,
                                          "depthwise_constraint":
                                          {"class_name": "NonNeg"})"),
              depthwise +
                  "depthwise_constraint NonNeg is not supported "
                  "(expected null)");
  ExpectError(image("DepthwiseConv2D", R"("kernel_size": 3,
                                          "depthwise_regularizer":
                                          {"class_name": "L3"})"),
              depthwise +
                  "depthwise_regularizer L3 is not supported "
                  "(supported: L1, L2, L1L2)");
  ExpectError(steps(R"("kernel_size": 3, "groups": 2)"),
              one_d + "groups 2 is not supported (expected 1)");
  ExpectError(steps(R"("kernel_size": 3, "padding": "full")"),
              one_d +
                  "padding \"full\" is not supported (expected "
                  "\"valid\", \"same\" or \"causal\")");
  ExpectError(steps(R"("kernel_size": 3, "strides": 2, "dilation_rate": 2)"),
              one_d +
                  "strides 2 with dilation_rate 2 is not supported "
                  "(Keras refuses strides > 1 together with "
                  "dilation_rate > 1)");
  ExpectError(steps(R"("kernel_size": [3, 3])"),
              one_d +
                  "kernel_size: expected an integer or a list of 1 "
                  "integer, got an array");
  ExpectError(steps(R"("kernel_size": 5, "dilation_rate": 3)"),
              one_d +
                  "kernel_size 5 with dilation_rate 3 does not fit the "
                  "input [9, 2] with padding \"valid\"");
  ExpectError(Sequential({Input("8, 8, 2"),
                          Layer("Conv1D", R"("name": "c", "filters": 2,
                                             "kernel_size": 3)")}),
              one_d +
                  "expects an input of rank 2 [steps, channels], got "
                  "[8, 8, 2]");
  ExpectError(
      Sequential({Input("4"), Layer("Embedding", R"("name": "e", "input_dim": 5,
                      "output_dim": 2, "embeddings_regularizer":
                      {"class_name": "L2", "config": {"l2": 0.1}})")}),
      "model: layer 1 'e' (Embedding): embeddings_regularizer L2 is not "
      "supported (expected null: the table lives on the ps tasks and no "
      "worker holds all of it, so Keras's penalty over the whole table "
      "cannot be computed)");
}

TEST(KerasModel, ReadsEmbeddingModels) {
  // tf.keras 2.x: no InputLayer; the shape and input_length on the layer.
  const ModelSpec model = MustParse(Sequential({
      Layer("Embedding", R"("name": "embedding", "trainable": true,
        "batch_input_shape": [null, 10], "dtype": "float32",
        "input_dim": 1000, "output_dim": 16,
        "embeddings_initializer": {"class_name": "RandomUniform",
          "config": {"minval": -0.05, "maxval": 0.05, "seed": null}},
        "embeddings_regularizer": null, "activity_regularizer": null,
        "embeddings_constraint": null, "mask_zero": false,
        "input_length": 10)"),
      Layer("Flatten", R"("name": "flatten")"),
      Layer("Dense", R"("name": "dense", "units": 1)"),
  }));
  EXPECT_EQ(model.input_shape, (std::vector<int64_t>{10}));
  EXPECT_EQ(model.input_dtype, DT_INT32);
  EXPECT_EQ(OutputShapes(model),
            (std::vector<std::vector<int64_t>>{{10, 16}, {160}, {1}}));
  const LayerSpec& embedding = model.layers[0];
  EXPECT_EQ(embedding.kind, LayerKind::kEmbedding);
  EXPECT_EQ(embedding.input_dim, 1000);
  EXPECT_EQ(embedding.output_dim, 16);
  EXPECT_EQ(embedding.variables,
            (std::vector<std::string>{"embedding/embeddings"}));
  const VariableDef& table = model.variables[0];
  EXPECT_EQ(table.name(), "embedding/embeddings");
  EXPECT_EQ(table.shape().dims_size(), 2);
  EXPECT_EQ(table.shape().dims(0), 1000);
  EXPECT_EQ(table.shape().dims(1), 16);
  EXPECT_TRUE(table.sparse());
  ASSERT_EQ(table.initializer().kind_case(), Initializer::kRandomUniform);
  EXPECT_EQ(table.initializer().random_uniform().minval(), -0.05f);
  EXPECT_EQ(table.initializer().random_uniform().maxval(), 0.05f);

  // With an InputLayer, and the default initializer.
  const ModelSpec defaults = MustParse(Sequential({
      Input("5"),
      Layer("Embedding", R"("name": "e", "input_dim": 7, "output_dim": 3)"),
  }));
  EXPECT_EQ(defaults.input_dtype, DT_INT32);
  EXPECT_EQ(defaults.output_shape, (std::vector<int64_t>{5, 3}));
  ASSERT_EQ(defaults.variables.size(), 1u);
  EXPECT_EQ(defaults.variables[0].initializer().random_uniform().minval(),
            -0.05f);
  EXPECT_EQ(defaults.variables[0].initializer().random_uniform().maxval(),
            0.05f);
}

TEST(KerasModel, ReadsActivationLayersAndRegularizers) {
  const ModelSpec model = MustParse(Sequential({
      Input("6"),
      Layer("Dense", R"("name": "dense", "units": 5, "activation": "linear",
        "kernel_regularizer": {"class_name": "L1L2",
                               "config": {"l1": 0.0, "l2": 0.001}})"),
      Layer("ReLU", R"("name": "relu", "max_value": null,
                       "negative_slope": 0.0, "threshold": 0.0)"),
      Layer("Dropout", R"("name": "dropout", "rate": 0)"),
      Layer("Activation", R"("name": "softmax", "activation": "softmax")"),
  }));
  EXPECT_EQ(model.layers[0].kernel_regularizer.l2, 0.001f);
  EXPECT_EQ(model.layers[0].kernel_regularizer.l1, 0.0f);
  EXPECT_EQ(model.layers[0].activation, Activation::kLinear);
  EXPECT_EQ(Kinds(model), (std::vector<LayerKind>{
                              LayerKind::kDense, LayerKind::kActivation,
                              LayerKind::kDropout, LayerKind::kActivation}));
  EXPECT_EQ(model.layers[1].activation, Activation::kRelu);
  EXPECT_EQ(model.layers[2].rate, 0.0f);
  EXPECT_EQ(model.layers[3].activation, Activation::kSoftmax);
  EXPECT_EQ(model.output_shape, (std::vector<int64_t>{5}));
}

// ---------------------------------------------------------------------------
// Errors.

TEST(KerasModel, RefusesInvalidJsonWithPosition) {
  ExpectError("{\"class_name\": \"Sequential\",\n \"config\": }",
              "model: invalid JSON: parse error at line 2, column 12: syntax "
              "error while parsing value - unexpected '}'; expected '[', '{', "
              "or a literal");
  ExpectError("",
              "model: invalid JSON: parse error at line 1, column 1: "
              "syntax error while parsing value - unexpected end of "
              "input; expected '[', '{', or a literal");
}

TEST(KerasModel, RefusesJsonNestedTooDeep) {
  // A field 100,000 arrays deep is refused as it is parsed, before anything
  // walks it recursively (DescribeJson, dump(): common/json_util.h).
  const int depth = 100000;
  ExpectError(
      Sequential({Input("4"), Layer("Dense", R"("name": "d", "units": )" +
                                                 std::string(depth, '[') +
                                                 std::string(depth, ']'))}),
      "model: invalid JSON: JSON nested more than 256 levels deep");
}

TEST(KerasModel, RefusesWhatIsNotAModel) {
  ExpectError("[1, 2]",
              "model: expected a JSON object (a Keras model), got an array");
  ExpectError(R"({"config": {}})", "model: class_name: missing");
  ExpectError(R"({"class_name": "Network", "config": {"layers": []}})",
              "model: class_name \"Network\" is not supported (expected "
              "Sequential, Functional or Model)");
  ExpectError(R"({"class_name": "Sequential"})", "model: config: missing");
  ExpectError(R"({"class_name": "Sequential", "config": [{}]})",
              "model: config: expected an object, got an array");
  ExpectError(R"({"class_name": "Sequential", "config": {"name": "m"}})",
              "model: config.layers: missing");
  ExpectError(R"({"class_name": "Sequential", "config": {"name": 1,
                                                         "layers": []}})",
              "model: config.name: expected a string, got a number");
  ExpectError(R"({"class_name": "Sequential", "config": {"layers": {}}})",
              "model: config.layers: expected a list, got an object");
  ExpectError(Sequential({}),
              "model: config.layers: no layers (besides an InputLayer)");
  ExpectError(Sequential({Input("3")}),
              "model: config.layers: no layers (besides an InputLayer)");
  ExpectError(Edit(ShippedJson("mlp"),
                   [](Json& m) { m["config"]["trainable"] = false; }),
              "model: config.trainable false is not supported (expected "
              "true: pstrain trains it all)");
}

TEST(KerasModel, RefusesUnsupportedLayers) {
  ExpectError(
      Sequential({Input("5, 3"), Layer("Flatten", R"("name": "f")"),
                  Layer("LSTM", R"("name": "lstm", "units": 4)")}),
      std::string("model: layer 2 'lstm' (LSTM): LSTM ") + kSupportedLayers);
  // A custom class registered under a Keras name.
  ExpectError(Edit(ShippedJson("mlp"),
                   [](Json& m) {
                     m["config"]["layers"][2]["registered_name"] = "my>Dense";
                     m["config"]["layers"][2]["module"] = "my_layers";
                   }),
              "model: layer 2 'dense' (Dense): custom class \"my>Dense\" "
              "(module \"my_layers\") is not supported");
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "d",
                  "units": 2, "kernel_initializer": {"class_name": "Mine",
                  "registered_name": "pkg>Mine", "config": {}})")}),
              "model: layer 1 'd' (Dense): kernel_initializer: custom class "
              "\"pkg>Mine\" (module \"keras\") is not supported");
}

// The brief's example, and every option pstrain does not implement.
TEST(KerasModel, RefusesUnsupportedOptions) {
  const std::string cnn = ShippedJson("cnn");
  const auto conv1 = [&cnn](const char* field, Json value) {
    return Edit(cnn, [&](Json& m) { LayerConfig(m, 3)[field] = value; });
  };
  const std::string at = "model: layer 3 'conv2d_1' (Conv2D): ";
  ExpectError(conv1("padding", "causal"),
              at + "padding \"causal\" is not supported (expected \"valid\" "
                   "or \"same\")");
  ExpectError(conv1("activation", "softsign"),
              at + "activation \"softsign\" " + kSupportedActivations);
  ExpectError(conv1("data_format", "channels_first"),
              at + "data_format \"channels_first\" is not supported (expected "
                   "\"channels_last\")");
  ExpectError(conv1("dilation_rate", Json::parse("[0, 2]")),
              at + "dilation_rate: [0, 2] is out of range (each value in "
                   "[1, 2147483647])");
  ExpectError(conv1("groups", 2),
              at + "groups 2 is not supported (expected 1)");
  ExpectError(conv1("quantization_config",
                    Json::parse(R"({"class_name": "Int8QuantizationConfig"})")),
              at + "quantization_config Int8QuantizationConfig is not "
                   "supported (expected null)");
  ExpectError(conv1("lora_rank", 4),
              at + "lora_rank 4 is not supported (expected null)");
  ExpectError(conv1("kernel_regularizer",
                    Json::parse(R"({"module": "keras.regularizers",
                        "class_name": "OrthogonalRegularizer",
                        "config": {"factor": 0.01},
                        "registered_name": null})")),
              at + "kernel_regularizer OrthogonalRegularizer is not supported "
                   "(supported: L1, L2, L1L2)");
  ExpectError(conv1("bias_regularizer", Json::parse(R"({"class_name": "L1L2",
                                    "config": {"l1": -0.5}})")),
              at + "bias_regularizer.config.l1: -0.5 is negative");
  ExpectError(conv1("activity_regularizer",
                    Json::parse(R"({"class_name": "L2", "config": {}})")),
              at + "activity_regularizer L2 is not supported (expected null)");
  ExpectError(
      conv1("kernel_constraint",
            Json::parse(R"({"class_name": "MaxNorm", "config": {}})")),
      at + "kernel_constraint MaxNorm is not supported (expected null)");
  ExpectError(conv1("kernel_initializer",
                    Json::parse(R"({"class_name": "STFT", "config": {}})")),
              at + "kernel_initializer STFT is not supported (supported: "
                   "GlorotUniform, GlorotNormal, HeUniform, HeNormal, "
                   "LecunUniform, LecunNormal, VarianceScaling, "
                   "RandomUniform, RandomNormal, TruncatedNormal, Orthogonal, "
                   "Identity, Zeros, Ones, Constant, or their snake_case "
                   "names)");
  ExpectError(conv1("dtype", Json::parse(R"({"module": "keras",
                  "class_name": "DTypePolicy",
                  "config": {"name": "mixed_float16"},
                  "registered_name": null})")),
              at + "dtype \"mixed_float16\" is not supported (expected "
                   "\"float32\")");
  ExpectError(conv1("dtype", "float64"),
              at + "dtype \"float64\" is not supported (expected \"float32\")");
  ExpectError(conv1("trainable", false),
              at + "trainable false is not supported (expected true: pstrain "
                   "trains every layer)");

  const std::string mlp = ShippedJson("mlp");
  ExpectError(Edit(mlp,
                   [](Json& m) {
                     LayerConfig(m, 1)["data_format"] = "channels_first";
                   }),
              "model: layer 1 'flatten' (Flatten): data_format "
              "\"channels_first\" is not supported (expected "
              "\"channels_last\")");
  ExpectError(Edit(mlp,
                   [](Json& m) {
                     LayerConfig(m, 3)["noise_shape"] =
                         Json::parse("[null, 1]");
                   }),
              "model: layer 3 'dropout' (Dropout): noise_shape [null, 1] is "
              "not supported (expected null)");
  ExpectError(Sequential({Input("4"), Layer("ReLU", R"("name": "relu0",
                                                       "max_value": 0)")}),
              "model: layer 1 'relu0' (ReLU): max_value 0 is not supported "
              "(expected null or > 0)");
  ExpectError(Sequential({Input("4"), Layer("ReLU", R"("name": "leaky",
                                                  "negative_slope": -0.3)")}),
              "model: layer 1 'leaky' (ReLU): negative_slope: -0.3 is "
              "negative");
  ExpectError(Sequential({Input("4"), Layer("Embedding", R"("name": "e",
                  "input_dim": 9, "output_dim": 2, "mask_zero": true)")}),
              "model: layer 1 'e' (Embedding): mask_zero true is not "
              "supported (expected false)");
}

TEST(KerasModel, RefusesBadValues) {
  const std::string at = "model: layer 1 'd' (Dense): ";
  const auto dense = [](const std::string& fields) {
    return Sequential(
        {Input("3"), Layer("Dense", absl::StrCat(R"("name": "d", )", fields))});
  };
  ExpectError(dense(R"("units": "4")"),
              at + "units: expected an integer, got a string");
  ExpectError(dense(R"("units": 4.5)"),
              at + "units: expected an integer, got a number");
  ExpectError(dense(R"("units": 0)"),
              at + "units: 0 is out of range [1, 2147483647]");
  ExpectError(dense(R"("units": 18446744073709551615)"),
              at + "units: 18446744073709551615 is out of range [1, "
                   "2147483647]");
  ExpectError(dense(R"("units": null)"),
              at + "units: expected an integer, got null");
  ExpectError(dense(R"("units": 4, "use_bias": "yes")"),
              at + "use_bias: expected true or false, got a string");
  ExpectError(dense(R"("units": 4, "activation": 3)"),
              at + "activation: expected a string, got a number");
  ExpectError(dense(R"("units": 4, "kernel_initializer": 1)"),
              at + "kernel_initializer: expected a Keras object "
                   "{\"class_name\": ..., \"config\": {...}}, got a number");
  ExpectError(dense(R"("units": 4, "kernel_initializer":
                       {"class_name": "Constant", "config": []})"),
              at + "kernel_initializer.config: expected an object, got an "
                   "array");
  ExpectError(dense(R"("units": 4, "kernel_initializer":
                       {"class_name": "Constant", "config": {"value": "1"}})"),
              at + "kernel_initializer.config.value: expected a number, got "
                   "a string");
  ExpectError(dense(R"("units": 4, "kernel_initializer": {"class_name":
                       "RandomUniform", "config": {"minval": 1, "maxval": 0}})"),
              at + "kernel_initializer.config.maxval: 0 is not above minval "
                   "1");
  ExpectError(dense(R"("units": 4, "kernel_initializer": {"class_name":
                       "TruncatedNormal", "config": {"stddev": 0}})"),
              at + "kernel_initializer.config.stddev: 0 is not > 0");
  ExpectError(dense(R"("units": 4, "kernel_regularizer": {"class_name": "L2",
                       "config": {"l2": -1}})"),
              at + "kernel_regularizer.config.l2: -1 is negative");
  ExpectError(dense(R"("units": 4, "dtype": 32)"),
              at + "dtype: expected a Keras object {\"class_name\": ..., "
                   "\"config\": {...}}, got a number");

  const std::string conv_at = "model: layer 1 'c' (Conv2D): ";
  const auto conv = [](const std::string& fields) {
    return Sequential(
        {Input("8, 8, 1"),
         Layer("Conv2D",
               absl::StrCat(R"("name": "c", )", R"("filters": 2, )", fields))});
  };
  ExpectError(conv(R"("kernel_size": "3")"),
              conv_at +
                  "kernel_size: expected an integer or a list of 2 "
                  "integers, got a string");
  ExpectError(conv(R"("kernel_size": [3, 3, 3])"),
              conv_at +
                  "kernel_size: expected an integer or a list of 2 "
                  "integers, got an array");
  ExpectError(conv(R"("kernel_size": [3, 0])"),
              conv_at +
                  "kernel_size: [3, 0] is out of range (each value in "
                  "[1, 2147483647])");
  ExpectError(conv(R"("kernel_size": 3, "strides": [1, -1])"),
              conv_at +
                  "strides: [1, -1] is out of range (each value in "
                  "[1, 2147483647])");

  const std::string mlp = ShippedJson("mlp");
  ExpectError(Edit(mlp, [](Json& m) { LayerConfig(m, 3)["rate"] = 1.0; }),
              "model: layer 3 'dropout' (Dropout): rate: 1 is out of range "
              "[0, 1)");
  ExpectError(Edit(mlp, [](Json& m) { LayerConfig(m, 3)["rate"] = -0.5; }),
              "model: layer 3 'dropout' (Dropout): rate: -0.5 is out of "
              "range [0, 1)");
  ExpectError(Edit(mlp, [](Json& m) { LayerConfig(m, 3)["rate"] = "0.5"; }),
              "model: layer 3 'dropout' (Dropout): rate: expected a number, "
              "got a string");
  ExpectError(Sequential({"3"}),
              "model: layer 0: expected an object, got a number");
  ExpectError(Sequential({Input("3"), R"({"class_name": 5, "config": {}})"}),
              "model: layer 1: class_name: expected a string, got a number");
  ExpectError(Sequential({Input("3"), R"({"class_name": "Dense",
                                          "config": "dense"})"}),
              "model: layer 1: config: expected an object, got a string");
}

TEST(KerasModel, RefusesMissingFields) {
  ExpectError(Sequential({Input("3"), R"({"config": {"name": "d"}})"}),
              "model: layer 1: class_name: missing");
  ExpectError(Sequential({Input("3"), R"({"class_name": "Dense"})"}),
              "model: layer 1: config: missing");
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("units": 2)")}),
              "model: layer 1 (Dense): name: missing");
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "d")")}),
              "model: layer 1 'd' (Dense): units: missing");
  ExpectError(Sequential({Input("8, 8, 1"),
                          Layer("Conv2D", R"("name": "c", "kernel_size": 3)")}),
              "model: layer 1 'c' (Conv2D): filters: missing");
  ExpectError(Sequential({Input("8, 8, 1"),
                          Layer("Conv2D", R"("name": "c", "filters": 3)")}),
              "model: layer 1 'c' (Conv2D): kernel_size: missing");
  ExpectError(Sequential({Input("3"), Layer("Dropout", R"("name": "d")")}),
              "model: layer 1 'd' (Dropout): rate: missing");
  ExpectError(Sequential({Input("3"), Layer("Activation", R"("name": "a")")}),
              "model: layer 1 'a' (Activation): activation: missing");
  ExpectError(
      Sequential(
          {Input("3"), Layer("Embedding", R"("name": "e", "output_dim": 2)")}),
      "model: layer 1 'e' (Embedding): input_dim: missing");
  ExpectError(Sequential({Input("3"), Layer("Embedding",
                                            R"("name": "e", "input_dim": 2)")}),
              "model: layer 1 'e' (Embedding): output_dim: missing");
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "d",
                  "units": 2, "kernel_initializer": {"config": {}})")}),
              "model: layer 1 'd' (Dense): kernel_initializer.class_name: "
              "missing");
}

TEST(KerasModel, RefusesBadLayerNames) {
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "d",
                                                       "units": 2)"),
                          Layer("Dense", R"("name": "d", "units": 2)")}),
              "model: layer 2 'd' (Dense): name: \"d\" is also the name of "
              "layer 1");
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "input",
                                                       "units": 2)")}),
              "model: layer 1 'input' (Dense): name: \"input\" is also the "
              "name of layer 0");
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "a/b",
                                                       "units": 2)")}),
              "model: layer 1 'a/b' (Dense): name: contains '/', which "
              "separates variable paths (\"dense/kernel\")");
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "",
                                                       "units": 2)")}),
              "model: layer 1 '' (Dense): name: is empty");
  // Found by the fuzzer: a name that would break the message's line.
  ExpectError(Sequential({Input("3"), Layer("Dense", R"("name": "a\nb",
                                                       "units": 2)")}),
              "model: layer 1 (Dense): name: contains a control character");
  ExpectError(Sequential({Input("3"), Layer("Dense\\t", R"("name": "d",
                                                         "units": 2)")}),
              "model: layer 1: class_name: contains a control character");
  ExpectError(
      Sequential({Input("3"), Layer("Dense", R"("name": "d",
                                                       "units": 2,
                                                       "activation": "re\nlu")")}),
      std::string("model: layer 1 'd' (Dense): activation \"re\\nlu\" ") +
          kSupportedActivations);
}

TEST(KerasModel, RefusesShapesItCannotCompute) {
  ExpectError(Sequential({Input("784"), Layer("Conv2D", R"("name": "c",
                              "filters": 2, "kernel_size": 3)")}),
              "model: layer 1 'c' (Conv2D): expects an input of rank 3 "
              "[height, width, channels], got [784]");
  ExpectError(Sequential({Input("2, 8, 1"), Layer("Conv2D", R"("name": "c",
                              "filters": 2, "kernel_size": 3)")}),
              "model: layer 1 'c' (Conv2D): kernel_size [3, 3] does not fit "
              "the input [2, 8, 1] with padding \"valid\"");
  ExpectError(
      Sequential({Input("1, 1, 4"), Layer("MaxPooling2D", R"("name": "p")")}),
      "model: layer 1 'p' (MaxPooling2D): pool_size [2, 2] does not "
      "fit the input [1, 1, 4] with padding \"valid\"");
  ExpectError(Sequential({Input("4"), Layer("Dense", R"("name": "d",
                              "units": 2)"),
                          Layer("Embedding", R"("name": "e", "input_dim": 5,
                                                "output_dim": 2)")}),
              "model: layer 2 'e' (Embedding): must be the first layer (the "
              "model's inputs are its integer ids)");
  ExpectError(Sequential({Input("4, 2"), Layer("Embedding", R"("name": "e",
                              "input_dim": 5, "output_dim": 2)")}),
              "model: layer 1 'e' (Embedding): expects an input of rank 1 "
              "[sequence length], got [4, 2]");
  ExpectError(Sequential({Input("4"), Layer("Embedding", R"("name": "e",
                  "input_dim": 5, "output_dim": 2, "input_length": 6)")}),
              "model: layer 1 'e' (Embedding): input_length: 6 does not match "
              "the input [4]");
}

TEST(KerasModel, RefusesMissingOrBadInputShapes) {
  ExpectError(Sequential({Layer("Flatten", R"("name": "f")"),
                          Layer("Dense", R"("name": "d", "units": 2)")}),
              "model: layer 0 'f' (Flatten): no input shape: start the model "
              "with an InputLayer (keras.Input(shape=...)) or give this layer "
              "input_shape");
  ExpectError(Sequential({R"({"class_name": "InputLayer",
                              "config": {"name": "in"}})",
                          Layer("Flatten", R"("name": "f")")}),
              "model: layer 0 'in' (InputLayer): batch_shape: missing");
  ExpectError(
      Sequential({Input("null, 28"), Layer("Flatten", R"("name": "f")")}),
      "model: layer 0 'input' (InputLayer): batch_input_shape[1]: is "
      "null: every dimension but the batch must be known");
  ExpectError(Sequential({Input("28, 0"), Layer("Flatten", R"("name": "f")")}),
              "model: layer 0 'input' (InputLayer): batch_input_shape[2]: "
              "expected an integer in [1, 2147483647], got 0");
  ExpectError(Edit(ShippedJson("mlp"),
                   [](Json& m) { LayerConfig(m, 0)["batch_shape"] = {28}; }),
              "model: layer 0 'input_layer' (InputLayer): batch_shape: "
              "expected a batch dimension and at least one more, got [28]");
  ExpectError(Edit(ShippedJson("mlp"),
                   [](Json& m) { LayerConfig(m, 0)["batch_shape"] = "28"; }),
              "model: layer 0 'input_layer' (InputLayer): batch_shape: "
              "expected a list [batch, dim, ...], got a string");
  ExpectError(Sequential({Layer("Flatten", R"("name": "f")"), Input("3")}),
              "model: layer 0 'f' (Flatten): no input shape: start the model "
              "with an InputLayer (keras.Input(shape=...)) or give this layer "
              "input_shape");
  ExpectError(Sequential({Input("3"), Layer("Flatten", R"("name": "f")"),
                          R"({"class_name": "InputLayer", "config": {
                              "name": "in2", "batch_input_shape": [null, 3]}})"}),
              "model: layer 2 'in2' (InputLayer): must be the first layer");
  ExpectError(Edit(ShippedJson("mlp"),
                   [](Json& m) {
                     LayerConfig(m, 1)["batch_input_shape"] =
                         Json::parse("[null, 28, 27]");
                   }),
              "model: layer 1 'flatten' (Flatten): batch_input_shape: "
              "[28, 27] (per example) does not match the input [28, 28] the "
              "layers before give");
}

TEST(KerasModel, LoadModelReadsFilesAndNamesWhatItCannotFind) {
  const ModelSpec from_file = MustLoad(kCnnKeras2);
  EXPECT_EQ(from_file.layers.size(), 7u);

  absl::StatusOr<ModelSpec> missing = LoadModel("resnet", kSeed);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "model \"resnet\": not a shipped model (cnn, mlp) and cannot "
            "read resnet: No such file or directory");

  absl::StatusOr<ModelSpec> directory = LoadModel("model/shipped", kSeed);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().message(),
            "model \"model/shipped\": cannot read model/shipped: Is a "
            "directory");

  // A path to something else than a model's JSON, however large, is read
  // no further than 64 MiB.
  absl::StatusOr<ModelSpec> endless = LoadModel("/dev/zero", kSeed);
  EXPECT_EQ(endless.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(endless.status().message(),
            "model \"/dev/zero\": /dev/zero is larger than 67108864 bytes");

  // Errors in a file's model name the file.
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/bad_model.json");
  std::FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs(Sequential({Input("3"), Layer("GRU", R"("name": "gru")")}).c_str(),
             file);
  std::fclose(file);
  absl::StatusOr<ModelSpec> bad = LoadModel(path, kSeed);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            absl::StrCat("model \"", path, "\": layer 1 'gru' (GRU): GRU ",
                         kSupportedLayers));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
