// Functional models (keras_functional.h) read through ParseKerasModel, in
// Keras 3's and tf.keras 2.x's forms.
#include <fstream>
#include <sstream>
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

constexpr uint64_t kSeed = 42;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------
// A small tf.keras 2.x Functional model builder: each layer a class, a config
// and the layers it reads.

Json InputLayer(const std::string& name, std::vector<int> dims) {
  Json shape = Json::array({nullptr});
  for (int d : dims) shape.push_back(d);
  return {{"class_name", "InputLayer"},
          {"name", name},
          {"config", {{"name", name}, {"batch_input_shape", shape}}},
          {"inbound_nodes", Json::array()}};
}

// A layer called once per entry of `calls`, each reading those layers.
Json Called(const std::string& class_name, Json config,
            std::vector<std::vector<std::string>> calls) {
  const std::string name = config["name"];
  Json nodes = Json::array();
  for (const auto& call : calls) {
    Json node = Json::array();
    for (const std::string& source : call) {
      node.push_back({source, 0, 0, Json::object()});
    }
    nodes.push_back(node);
  }
  return {{"class_name", class_name},
          {"name", name},
          {"config", config},
          {"inbound_nodes", nodes}};
}

Json Layer(const std::string& class_name, Json config,
           std::vector<std::string> reads) {
  return Called(class_name, std::move(config), {std::move(reads)});
}

Json Dense(const std::string& name, int units,
           const std::string& activation = "linear") {
  return {{"name", name}, {"units", units}, {"activation", activation}};
}

std::string Model(Json layers, Json inputs, Json outputs) {
  Json model = {{"class_name", "Model"},
                {"config",
                 {{"name", "model"},
                  {"layers", layers},
                  {"input_layers", inputs},
                  {"output_layers", outputs}}}};
  return model.dump();
}

// input [4] -> dense_a (Dense 4) -> dense_b (Dense 3).
Json ChainLayers() {
  return Json::array({InputLayer("x", {4}),
                      Layer("Dense", Dense("dense_a", 4, "relu"), {"x"}),
                      Layer("Dense", Dense("dense_b", 3), {"dense_a"})});
}

ModelSpec MustParse(const std::string& json) {
  absl::StatusOr<ModelSpec> model = ParseKerasModel(json, kSeed);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : ModelSpec();
}

void ExpectError(const std::string& json, const std::string& message) {
  absl::StatusOr<ModelSpec> model = ParseKerasModel(json, kSeed);
  ASSERT_FALSE(model.ok()) << json;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(model.status().message()), message);
}

// The model's structure as one string: each layer's name, what it reads
// (i<k> model input k, l<k> layer k), shares, output shape, variables.
std::string Describe(const ModelSpec& model) {
  std::vector<std::string> parts;
  for (const InputSpec& input : model.inputs) {
    parts.push_back(absl::StrCat("input ", input.name, " [",
                                 absl::StrJoin(input.shape, ","), "] ",
                                 DataType_Name(input.dtype)));
  }
  for (const LayerSpec& layer : model.layers) {
    std::vector<std::string> reads;
    for (const TensorRef& ref : layer.inputs) {
      reads.push_back(absl::StrCat(ref.model_input ? "i" : "l", ref.index));
    }
    parts.push_back(absl::StrCat(
        layer.name, " <- ", absl::StrJoin(reads, ","),
        layer.shares >= 0 ? absl::StrCat(" shares l", layer.shares) : "",
        " [", absl::StrJoin(layer.output_shape, ","), "] {",
        absl::StrJoin(layer.variables, ","), "}"));
  }
  parts.push_back(absl::StrCat("outputs ", absl::StrJoin(model.outputs, ",")));
  return absl::StrJoin(parts, "; ");
}

// What must agree between two readings of one model: the structure, and
// every variable's definition (shape, initializer, seed).
void ExpectSameModel(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(Describe(a), Describe(b));
  ASSERT_EQ(a.variables.size(), b.variables.size());
  for (size_t i = 0; i < a.variables.size(); ++i) {
    EXPECT_EQ(a.variables[i].DebugString(), b.variables[i].DebugString());
  }
}

// ---------------------------------------------------------------------------

TEST(KerasFunctional, ReadsSeedModelInKeras3AndKeras2Forms) {
  const ModelSpec keras3 =
      MustParse(ReadFile("examples/seed000_mlp.keras3.json"));
  EXPECT_EQ(Describe(keras3),
            "input input_layer [28,28,1] DT_FLOAT; flatten <- i0 [784] {}; "
            "d1 <- l0 [200] {d1/kernel}; dropout <- l1 [200] {}; "
            "d2 <- l2 [10] {d2/kernel,d2/bias}; outputs 3");
  EXPECT_EQ(keras3.input_shape, (std::vector<int64_t>{28, 28, 1}));
  EXPECT_EQ(keras3.output_shape, (std::vector<int64_t>{10}));
  EXPECT_EQ(keras3.layers[2].rate, 0.4f);
  EXPECT_FALSE(keras3.layers[1].use_bias);

  ModelSpec keras2 = MustParse(ReadFile("examples/seed000_mlp.keras2.json"));
  keras2.inputs[0].name = "input_layer";  // tf.keras names it input_1.
  ExpectSameModel(keras3, keras2);
}

// The multi-input example: float features and ids through an Embedding,
// a Concatenate of one list argument (Keras 3's merge call form).
TEST(KerasFunctional, ReadsTheTwoInputExample) {
  const ModelSpec model =
      MustParse(ReadFile("examples/two_input.keras3.json"));
  EXPECT_EQ(Describe(model),
            "input dense [4] DT_FLOAT; input ids [2] DT_INT32; "
            "embedding <- i1 [2,4] {embedding/embeddings}; "
            "flatten <- l0 [8] {}; concatenate <- i0,l1 [12] {}; "
            "hidden <- l2 [16] {hidden/kernel,hidden/bias}; "
            "click <- l3 [1] {click/kernel,click/bias}; outputs 4");
}

TEST(KerasFunctional, ReadsEveryKeras3FormOfTheEndpoints) {
  // Before Keras 3.11 a single input or output is a list of one.
  const std::string text = ReadFile("examples/seed000_mlp.keras3.json");
  Json old = Json::parse(text);
  old["config"]["input_layers"] = {{"input_layer", 0, 0}};
  old["config"]["output_layers"] = {{"d2", 0, 0}};
  ExpectSameModel(MustParse(text), MustParse(old.dump()));
  // Dicts of named inputs.
  Json named = Json::parse(text);
  named["config"]["input_layers"] = {{"image", {"input_layer", 0, 0}}};
  ExpectSameModel(MustParse(text), MustParse(named.dump()));
}

TEST(KerasFunctional, EqualsTheSequentialFormOfTheSameLayers) {
  const ModelSpec functional =
      MustParse(Model(ChainLayers(), {{"x", 0, 0}}, {{"dense_b", 0, 0}}));
  Json sequential_layers = Json::array();
  for (const Json& layer : ChainLayers()) {
    sequential_layers.push_back(
        {{"class_name", layer["class_name"]}, {"config", layer["config"]}});
  }
  ModelSpec sequential = MustParse(
      Json({{"class_name", "Sequential"},
            {"config", {{"name", "model"}, {"layers", sequential_layers}}}})
          .dump());
  sequential.inputs[0].name = "x";
  ExpectSameModel(functional, sequential);
}

TEST(KerasFunctional, OrdersLayersSoEachComesAfterWhatItReads) {
  Json layers = ChainLayers();
  std::swap(layers[1], layers[2]);  // dense_b listed before dense_a.
  EXPECT_EQ(Describe(MustParse(Model(layers, {{"x", 0, 0}},
                                     {{"dense_b", 0, 0}}))),
            "input x [4] DT_FLOAT; dense_a <- i0 [4] "
            "{dense_a/kernel,dense_a/bias}; dense_b <- l0 [3] "
            "{dense_b/kernel,dense_b/bias}; outputs 1");
}

TEST(KerasFunctional, ASharedLayerIsOneSetOfVariables) {
  // dense_a is called on x, then on its own output.
  const Json layers = Json::array(
      {InputLayer("x", {4}),
       Called("Dense", Dense("dense_a", 4), {{"x"}, {"dense_a"}}),
       {{"class_name", "Dense"},
        {"name", "out"},
        {"config", Dense("out", 2)},
        {"inbound_nodes", {{{"dense_a", 1, 0, Json::object()}}}}}});
  const ModelSpec model =
      MustParse(Model(layers, {{"x", 0, 0}}, {{"out", 0, 0}}));
  EXPECT_EQ(Describe(model),
            "input x [4] DT_FLOAT; dense_a <- i0 [4] "
            "{dense_a/kernel,dense_a/bias}; dense_a <- l0 shares l0 [4] "
            "{dense_a/kernel,dense_a/bias}; out <- l1 [2] "
            "{out/kernel,out/bias}; outputs 2");
  EXPECT_EQ(model.variables.size(), 4u);
}

TEST(KerasFunctional, ExpandsANestedSequentialModel) {
  const Json nested = {
      {"class_name", "Sequential"},
      {"name", "block"},
      {"config",
       {{"name", "block"},
        {"layers",
         {{{"class_name", "InputLayer"},
           {"config", {{"name", "in"}, {"batch_input_shape", {nullptr, 4}}}}},
          {{"class_name", "Dense"}, {"config", Dense("dense", 5, "relu")}},
          {{"class_name", "Dropout"},
           {"config", {{"name", "drop"}, {"rate", 0.5}}}}}}}},
      {"inbound_nodes", {{{"x", 0, 0, Json::object()}}}}};
  const Json layers = Json::array(
      {InputLayer("x", {4}), nested, Layer("Dense", Dense("out", 2), {"block"})});
  const ModelSpec model =
      MustParse(Model(layers, {{"x", 0, 0}}, {{"out", 0, 0}}));
  EXPECT_EQ(Describe(model),
            "input x [4] DT_FLOAT; block/dense <- i0 [5] "
            "{block/dense/kernel,block/dense/bias}; block/drop <- l0 [5] {}; "
            "out <- l1 [2] {out/kernel,out/bias}; outputs 2");

  Json wrong_shape = nested;
  wrong_shape["config"]["layers"][0]["config"]["batch_input_shape"] = {nullptr,
                                                                       3};
  ExpectError(
      Model(Json::array({InputLayer("x", {4}), wrong_shape,
                         Layer("Dense", Dense("out", 2), {"block"})}),
            {{"x", 0, 0}}, {{"out", 0, 0}}),
      "model: layer 1 'block' (Sequential): layer 0 'in' (InputLayer): "
      "declares the input [3] (per example), but is called on [4]");
}

TEST(KerasFunctional, AnEmbeddingMakesItsInputIds) {
  const Json layers = Json::array(
      {InputLayer("ids", {6}),
       Layer("Embedding",
             {{"name", "emb"}, {"input_dim", 10}, {"output_dim", 3}}, {"ids"}),
       Layer("Flatten", {{"name", "flat"}}, {"emb"}),
       Layer("Dense", Dense("out", 2), {"flat"})});
  const ModelSpec model =
      MustParse(Model(layers, {{"ids", 0, 0}}, {{"out", 0, 0}}));
  EXPECT_EQ(model.inputs[0].dtype, DT_INT32);
  EXPECT_EQ(model.input_dtype, DT_INT32);
}

TEST(KerasFunctional, RefusesGraphErrorsNamingTheLayers) {
  const Json inputs = {{"x", 0, 0}};
  const Json outputs = {{"dense_b", 0, 0}};
  Json layers = ChainLayers();
  layers[2]["inbound_nodes"][0][0][0] = "nowhere";
  ExpectError(Model(layers, inputs, outputs),
              "model: layer 2 'dense_b' (Dense): reads a tensor of 'nowhere', "
              "which is not a layer of the model");

  layers = ChainLayers();
  layers[2]["inbound_nodes"][0][0][1] = 1;
  ExpectError(Model(layers, inputs, outputs),
              "model: layer 2 'dense_b' (Dense): reads call 1 of 'dense_a', "
              "which is called 1 time(s)");

  layers = ChainLayers();
  layers[2]["inbound_nodes"][0][0][2] = 1;
  ExpectError(Model(layers, inputs, outputs),
              "model: layer 2 'dense_b' (Dense): reads output 1 of 'dense_a', "
              "which has one output (0)");

  layers = ChainLayers();
  layers[1]["inbound_nodes"][0][0][0] = "dense_b";  // a <- b <- a
  ExpectError(Model(layers, inputs, outputs),
              "model: layers 'dense_a', 'dense_b' read each other's outputs: "
              "the graph has a cycle");

  layers = ChainLayers();
  layers.push_back(InputLayer("unused", {2}));
  ExpectError(Model(layers, inputs, outputs),
              "model: layer 3 'unused' (InputLayer): is not among the model's "
              "input_layers");
  ExpectError(Model(layers, {{"x", 0, 0}, {"unused", 0, 0}}, outputs),
              "model: input 'unused': no layer reads it");

  ExpectError(Model(ChainLayers(), {{"dense_a", 0, 0}}, outputs),
              "model: config.input_layers: 'dense_a' is a Dense, not an "
              "InputLayer");
  ExpectError(Model(ChainLayers(), inputs, {{"dense_c", 0, 0}}),
              "model: config.output_layers: 'dense_c' is not a layer of the "
              "model");
  ExpectError(Model(ChainLayers(), inputs, {{"x", 0, 0}}),
              "model: config.output_layers: 'x' is an input, not a layer's "
              "output");
  ExpectError(Model(ChainLayers(), inputs, {{"dense_a", 0, 0}, outputs[0]}),
              "model: config.output_layers: names 2 outputs (dense_a, "
              "dense_b); several outputs are not supported yet");
  ExpectError(Model(ChainLayers(), inputs, Json::array()),
              "model: config.output_layers: is empty");

  layers = ChainLayers();
  layers[2]["name"] = "dense_a";
  layers[2]["config"]["name"] = "dense_a";
  ExpectError(Model(layers, inputs, {{"dense_a", 0, 0}}),
              "model: layer 2 'dense_a' (Dense): name: \"dense_a\" is also the "
              "name of layer 1");
}

TEST(KerasFunctional, RefusesCallsItCannotCompute) {
  const Json inputs = {{"x", 0, 0}};
  const Json outputs = {{"dense_b", 0, 0}};
  Json layers = ChainLayers();
  layers[2]["inbound_nodes"][0].push_back({"x", 0, 0, Json::object()});
  ExpectError(Model(layers, inputs, outputs),
              "model: layer 2 'dense_b' (Dense): reads 2 tensors; Dense reads "
              "one");

  layers = ChainLayers();
  layers[2]["inbound_nodes"][0][0][3] = {{"training", true}};
  ExpectError(Model(layers, inputs, outputs),
              "model: layer 2 'dense_b' (Dense): inbound_nodes[0][0][3]."
              "training: true is not supported (expected null)");

  // Keras 3's call form: a non-tensor argument, a keyword argument.
  Json keras3 = Json::parse(ReadFile("examples/seed000_mlp.keras3.json"));
  Json& args = keras3["config"]["layers"][2]["inbound_nodes"][0]["args"];
  args.push_back(2);
  ExpectError(keras3.dump(),
              "model: layer 2 'd1' (Dense): inbound_nodes[0].args[1]: 2 is not "
              "a tensor: arguments other than tensors are not supported");
  args.erase(1);
  keras3["config"]["layers"][2]["inbound_nodes"][0]["kwargs"] = {
      {"mask", nullptr}, {"training", false}};
  ExpectError(keras3.dump(),
              "model: layer 2 'd1' (Dense): inbound_nodes[0].kwargs.training: "
              "false is not supported (expected null)");

  // A shared layer on another shape.
  layers = Json::array(
      {InputLayer("x", {4}), InputLayer("y", {5}),
       Called("Dense", Dense("shared", 3), {{"x"}, {"y"}}),
       {{"class_name", "Dense"},
        {"name", "out"},
        {"config", Dense("out", 2)},
        {"inbound_nodes", {{{"shared", 1, 0, Json::object()}}}}}});
  ExpectError(Model(layers, {{"x", 0, 0}, {"y", 0, 0}}, {{"out", 0, 0}}),
              "model: layer 2 'shared' (Dense): is called on input 'y' of "
              "shape [5] but first on [4]: a shared layer must see one input "
              "shape");

  // Embeddings read model inputs, and an input feeds one kind of layer.
  layers = Json::array(
      {InputLayer("ids", {6}), Layer("Flatten", {{"name", "flat"}}, {"ids"}),
       Layer("Embedding",
             {{"name", "emb"}, {"input_dim", 10}, {"output_dim", 3}},
             {"flat"})});
  ExpectError(Model(layers, {{"ids", 0, 0}}, {{"emb", 0, 0}}),
              "model: layer 'emb' (Embedding) reads layer 'flat': an "
              "Embedding must read a model input (its integer ids)");
  layers[2]["inbound_nodes"][0][0][0] = "ids";
  ExpectError(Model(layers, {{"ids", 0, 0}}, {{"emb", 0, 0}}),
              "model: input 'ids': read both by Embedding 'emb' (as integer "
              "ids) and by 'flat' (as floats); give each its own input");

  Json nested = {{"class_name", "Functional"},
                 {"name", "inner"},
                 {"config", {{"name", "inner"}, {"layers", Json::array()}}},
                 {"inbound_nodes", {{{"x", 0, 0, Json::object()}}}}};
  ExpectError(Model(Json::array({InputLayer("x", {4}), nested}), inputs,
                    {{"inner", 0, 0}}),
              "model: layer 1 'inner' (Functional): a Functional model nested "
              "in another is not supported (a nested Sequential model is)");

  layers = ChainLayers();
  layers[0]["config"]["ragged"] = true;
  ExpectError(Model(layers, inputs, outputs),
              "model: layer 0 'x' (InputLayer): ragged true is not supported "
              "(expected false)");
}

TEST(KerasFunctional, ReadsMergeLayersAndRefusesMismatchedInputs) {
  const auto model = [](const std::string& merge, const Json& config,
                        std::vector<std::string> reads) {
    Json c = config;
    c["name"] = "m";
    return Model(Json::array({InputLayer("x", {2, 4}),
                              Layer("Dense", Dense("a", 4), {"x"}),
                              Layer("Dense", Dense("b", 3), {"x"}),
                              Layer(merge, c, std::move(reads))}),
                 {{"x", 0, 0}}, {{"m", 0, 0}});
  };
  const ModelSpec concat =
      MustParse(model("Concatenate", {{"axis", -1}}, {"a", "b", "x"}));
  EXPECT_EQ(concat.layers[2].kind, LayerKind::kConcatenate);
  EXPECT_EQ(concat.layers[2].axis, 1);
  EXPECT_EQ(concat.output_shape, (std::vector<int64_t>{2, 11}));
  const ModelSpec add = MustParse(model("Add", Json::object(), {"a", "x"}));
  EXPECT_EQ(add.layers[2].kind, LayerKind::kMerge);
  EXPECT_EQ(add.layers[2].merge, MergeOp::kAdd);
  EXPECT_EQ(add.layers[2].inputs,
            (std::vector<TensorRef>{TensorRef{false, 0}, TensorRef{true, 0}}));

  ExpectError(model("Add", Json::object(), {"a", "b"}),
              "model: layer 3 'm' (Add): input 1 has shape [2, 3], input 0 "
              "[2, 4]: merged inputs must have one shape");
  ExpectError(model("Subtract", Json::object(), {"a", "x", "a"}),
              "model: layer 3 'm' (Subtract): reads 3 tensor(s); it needs "
              "exactly 2");
  ExpectError(model("Maximum", Json::object(), {"a"}),
              "model: layer 3 'm' (Maximum): reads 1 tensor(s); it needs at "
              "least 2");
  ExpectError(model("Concatenate", {{"axis", 1}}, {"a", "b"}),
              "model: layer 3 'm' (Concatenate): input 1 has shape [2, 3], "
              "input 0 [2, 4]: they must agree but on axis 1");
  ExpectError(model("Concatenate", {{"axis", 0}}, {"a", "x"}),
              "model: layer 3 'm' (Concatenate): axis 0 is not supported (the "
              "batch axis; expected another)");
}

TEST(KerasFunctional, KeepsBranches) {
  const Json layers = Json::array(
      {InputLayer("x", {4}), Layer("Dense", Dense("a", 4), {"x"}),
       Layer("Dense", Dense("b", 4), {"x"}),
       Layer("Dense", Dense("c", 2), {"b"})});
  EXPECT_EQ(Describe(MustParse(Model(layers, {{"x", 0, 0}}, {{"c", 0, 0}}))),
            "input x [4] DT_FLOAT; a <- i0 [4] {a/kernel,a/bias}; b <- i0 [4] "
            "{b/kernel,b/bias}; c <- l1 [2] {c/kernel,c/bias}; outputs 2");
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
