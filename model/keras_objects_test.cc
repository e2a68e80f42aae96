#include "model/keras_objects.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

constexpr char kWhere[] = "model: layer 1 'd' (Dense): ";

// ParseInitializer on {"kernel_initializer": <value>}, with zeros as the
// fallback.
absl::StatusOr<Initializer> Parse(const Json& value) {
  const Json layer = {{"kernel_initializer", value}};
  const KerasFields fields(layer, kWhere);
  Initializer zeros;
  zeros.mutable_zeros();
  return ParseInitializer(fields, "kernel_initializer", zeros);
}

Initializer FromText(const std::string& text) {
  Initializer init;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &init))
      << text;
  return init;
}

// Expects `value` to parse to the Initializer written as `text`.
void ExpectParses(const Json& value, const std::string& text) {
  SCOPED_TRACE(value.dump());
  const absl::StatusOr<Initializer> init = Parse(value);
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_EQ(init->DebugString(), FromText(text).DebugString());
}

void ExpectError(const Json& value, const std::string& message) {
  SCOPED_TRACE(value.dump());
  const absl::StatusOr<Initializer> init = Parse(value);
  ASSERT_FALSE(init.ok()) << init->DebugString();
  EXPECT_EQ(init.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(init.status().message(), message);
}

// Keras 3's object form of `class_name` with `config`.
Json Keras3(const std::string& class_name, Json config = Json::object()) {
  return {{"module", "keras.initializers"},
          {"class_name", class_name},
          {"config", std::move(config)},
          {"registered_name", nullptr}};
}

constexpr char kGlorotNormal[] =
    "variance_scaling { scale: 1 mode: FAN_AVG distribution: TRUNCATED_NORMAL "
    "}";
constexpr char kHeUniform[] =
    "variance_scaling { scale: 2 mode: FAN_IN distribution: UNIFORM }";
constexpr char kHeNormal[] =
    "variance_scaling { scale: 2 mode: FAN_IN distribution: TRUNCATED_NORMAL }";
constexpr char kLecunUniform[] =
    "variance_scaling { scale: 1 mode: FAN_IN distribution: UNIFORM }";
constexpr char kLecunNormal[] =
    "variance_scaling { scale: 1 mode: FAN_IN distribution: TRUNCATED_NORMAL }";

TEST(ParseInitializer, EveryNameWithItsDefaults) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"GlorotUniform", "glorot_uniform", "GlorotUniformV2",
        "glorot_uniformV2"},
       "glorot_uniform {}"},
      {{"GlorotNormal", "glorot_normal", "GlorotNormalV2"}, kGlorotNormal},
      {{"HeUniform", "he_uniform", "he_uniformV2"}, kHeUniform},
      {{"HeNormal", "he_normal", "HeNormalV2"}, kHeNormal},
      {{"LecunUniform", "lecun_uniform"}, kLecunUniform},
      {{"LecunNormal", "lecun_normal", "lecun_normalV2"}, kLecunNormal},
      {{"VarianceScaling", "variance_scaling", "VarianceScalingV2"},
       "variance_scaling { scale: 1 mode: FAN_IN "
       "distribution: TRUNCATED_NORMAL }"},
      {{"RandomNormal", "random_normal", "normal", "RandomNormalV2"},
       "random_normal { mean: 0 stddev: 0.05 }"},
      {{"RandomUniform", "random_uniform", "uniform"},
       "random_uniform { minval: -0.05 maxval: 0.05 }"},
      {{"TruncatedNormal", "truncated_normal", "TruncatedNormalV2"},
       "truncated_normal { mean: 0 stddev: 0.05 }"},
      {{"Orthogonal", "orthogonal", "OrthogonalInitializer", "OrthogonalV2"},
       "orthogonal { gain: 1 }"},
      {{"Identity", "identity", "IdentityInitializer", "IdentityV2"},
       "identity { gain: 1 }"},
      {{"Zeros", "zeros", "zero", "ZerosV2"}, "zeros {}"},
      {{"Ones", "ones", "one", "OnesV2"}, "constant { value: 1 }"},
      {{"Constant", "constant", "ConstantV2"}, "constant { value: 0 }"},
  };
  for (const auto& [names, text] : cases) {
    for (const std::string& name : names) {
      // A bare identifier, tf.keras 2's object, Keras 3's object.
      ExpectParses(name, text);
      ExpectParses({{"class_name", name}, {"config", Json::object()}}, text);
      ExpectParses(Keras3(name, {{"seed", nullptr}}), text);
    }
  }
  // Absent or null: the fallback.
  ExpectParses(nullptr, "zeros {}");
}

TEST(ParseInitializer, ReadsParameters) {
  ExpectParses(Keras3("VarianceScaling", {{"scale", 0.5},
                                          {"mode", "fan_out"},
                                          {"distribution", "uniform"},
                                          {"seed", 7},
                                          {"input_axes", nullptr},
                                          {"output_axes", nullptr}}),
               "variance_scaling { scale: 0.5 mode: FAN_OUT "
               "distribution: UNIFORM }");
  ExpectParses(
      Keras3("VarianceScaling", {{"scale", 3},
                                 {"mode", "fan_avg"},
                                 {"distribution", "untruncated_normal"}}),
      "variance_scaling { scale: 3 mode: FAN_AVG "
      "distribution: UNTRUNCATED_NORMAL }");
  // Keras lowercases the distribution; "normal" is truncated_normal.
  ExpectParses(
      Keras3("VarianceScaling", {{"distribution", "Truncated_Normal"}}),
      "variance_scaling { scale: 1 mode: FAN_IN "
      "distribution: TRUNCATED_NORMAL }");
  ExpectParses(Keras3("VarianceScaling", {{"distribution", "normal"}}),
               "variance_scaling { scale: 1 mode: FAN_IN "
               "distribution: TRUNCATED_NORMAL }");
  ExpectParses(Keras3("RandomNormal", {{"mean", 1}, {"stddev", 0.25}}),
               "random_normal { mean: 1 stddev: 0.25 }");
  ExpectParses(Keras3("TruncatedNormal", {{"mean", -1}, {"stddev", 2}}),
               "truncated_normal { mean: -1 stddev: 2 }");
  ExpectParses(Keras3("Orthogonal", {{"gain", -2}, {"seed", nullptr}}),
               "orthogonal { gain: -2 }");
  ExpectParses(Keras3("Identity", {{"gain", 0.5}}), "identity { gain: 0.5 }");
  ExpectParses(Keras3("Constant", {{"value", -0.25}}),
               "constant { value: -0.25 }");
  // The Glorot, He and LeCun forms have fixed parameters (Keras 3 writes the
  // fan axes, null by default).
  ExpectParses(
      Keras3("HeNormal",
             {{"seed", 3}, {"input_axes", nullptr}, {"output_axes", nullptr}}),
      kHeNormal);
}

// What TensorFlow.js 4.22.0's model.toJSON() writes for a Dense layer's
// kernel_initializer with each of its initializers (its camelCase
// identifiers never reach the JSON): Glorot, He and LeCun as VarianceScaling
// with snake_case modes and "normal" for the truncated normal.
TEST(ParseInitializer, TensorFlowJsJson) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // glorotNormal
      {R"({"class_name":"VarianceScaling","config":{"scale":1,
          "mode":"fan_avg","distribution":"normal","seed":null}})",
       kGlorotNormal},
      // glorotUniform: the same values as glorot_uniform.
      {R"({"class_name":"VarianceScaling","config":{"scale":1,
          "mode":"fan_avg","distribution":"uniform","seed":null}})",
       "variance_scaling { scale: 1 mode: FAN_AVG distribution: UNIFORM }"},
      // heNormal, heUniform, leCunNormal, leCunUniform
      {R"({"class_name":"VarianceScaling","config":{"scale":2,
          "mode":"fan_in","distribution":"normal","seed":null}})",
       kHeNormal},
      {R"({"class_name":"VarianceScaling","config":{"scale":2,
          "mode":"fan_in","distribution":"uniform","seed":null}})",
       kHeUniform},
      {R"({"class_name":"VarianceScaling","config":{"scale":1,
          "mode":"fan_in","distribution":"normal","seed":null}})",
       kLecunNormal},
      {R"({"class_name":"VarianceScaling","config":{"scale":1,
          "mode":"fan_in","distribution":"uniform","seed":null}})",
       kLecunUniform},
      // tf.initializers.varianceScaling({mode: 'fanOut', ...}) and with
      // distribution 'truncatedNormal'.
      {R"({"class_name":"VarianceScaling","config":{"scale":0.5,
          "mode":"fan_out","distribution":"uniform","seed":3}})",
       "variance_scaling { scale: 0.5 mode: FAN_OUT distribution: UNIFORM }"},
      {R"({"class_name":"VarianceScaling","config":{"scale":2,
          "mode":"fan_avg","distribution":"truncated_normal","seed":null}})",
       "variance_scaling { scale: 2 mode: FAN_AVG "
       "distribution: TRUNCATED_NORMAL }"},
      {R"({"class_name":"Identity","config":{"gain":1}})",
       "identity { gain: 1 }"},
      {R"({"class_name":"Ones","config":{}})", "constant { value: 1 }"},
      {R"({"class_name":"Orthogonal","config":{"gain":2,"seed":null}})",
       "orthogonal { gain: 2 }"},
      {R"({"class_name":"RandomNormal","config":{"mean":1,"stddev":0.2,
          "seed":null}})",
       "random_normal { mean: 1 stddev: 0.2 }"},
      {R"({"class_name":"RandomUniform","config":{"minval":-0.05,
          "maxval":0.05,"seed":null}})",
       "random_uniform { minval: -0.05 maxval: 0.05 }"},
      {R"({"class_name":"TruncatedNormal","config":{"mean":0,"stddev":0.05,
          "seed":null}})",
       "truncated_normal { mean: 0 stddev: 0.05 }"},
      {R"({"class_name":"Zeros","config":{}})", "zeros {}"},
      {R"({"class_name":"Constant","config":{"value":0.5}})",
       "constant { value: 0.5 }"},
  };
  for (const auto& [json, text] : cases) ExpectParses(Json::parse(json), text);
}

TEST(ParseInitializer, RefusesParametersOutOfRange) {
  const std::string at = absl::StrCat(kWhere, "kernel_initializer.config.");
  ExpectError(Keras3("VarianceScaling", {{"scale", 0}}),
              at + "scale: 0 is not > 0");
  ExpectError(Keras3("VarianceScaling", {{"scale", -1.5}}),
              at + "scale: -1.5 is not > 0");
  ExpectError(Keras3("VarianceScaling", {{"scale", 1e-50}}),
              at + "scale: 1e-50 is 0 as a float");
  ExpectError(Keras3("VarianceScaling", {{"scale", "big"}}),
              at + "scale: expected a number, got a string");
  ExpectError(Keras3("VarianceScaling", {{"mode", "fanIn"}}),
              at + "mode \"fanIn\" is not supported (expected \"fan_in\", "
                   "\"fan_out\" or \"fan_avg\")");
  ExpectError(Keras3("VarianceScaling", {{"distribution", "cauchy"}}),
              at + "distribution \"cauchy\" is not supported (expected "
                   "\"truncated_normal\", \"untruncated_normal\", \"uniform\" "
                   "or \"normal\")");
  ExpectError(Keras3("VarianceScaling", {{"input_axes", {0}}}),
              at + "input_axes [0] is not supported (expected null)");
  ExpectError(Keras3("HeUniform", {{"output_axes", {-1}}}),
              at + "output_axes [-1] is not supported (expected null)");
  ExpectError(Keras3("GlorotUniform", {{"input_axes", {0, 1}}}),
              at + "input_axes [0, 1] is not supported (expected null)");
  ExpectError(Keras3("RandomNormal", {{"stddev", 0}}),
              at + "stddev: 0 is not > 0");
  ExpectError(Keras3("RandomNormal", {{"stddev", -0.1}}),
              at + "stddev: -0.1 is not > 0");
  ExpectError(Keras3("RandomNormal", {{"mean", 1e300}}),
              at + "mean: 1e+300 is out of float range");
  ExpectError(Keras3("TruncatedNormal", {{"stddev", 0}}),
              at + "stddev: 0 is not > 0");
  ExpectError(Keras3("Orthogonal", {{"gain", 1e39}}),
              at + "gain: 1e+39 is out of float range");
  ExpectError(Keras3("Identity", {{"gain", "one"}}),
              at + "gain: expected a number, got a string");
  ExpectError(Keras3("Constant", {{"value", -1e300}}),
              at + "value: -1e+300 is out of float range");
}

TEST(ParseInitializer, UnknownNamesListTheSupportedOnes) {
  const std::string supported =
      "(supported: GlorotUniform, GlorotNormal, HeUniform, HeNormal, "
      "LecunUniform, LecunNormal, VarianceScaling, RandomUniform, "
      "RandomNormal, TruncatedNormal, Orthogonal, Identity, Zeros, Ones, "
      "Constant, or their snake_case names)";
  const std::string at = absl::StrCat(kWhere, "kernel_initializer ");
  // Keras 3's STFT, TF.js's camelCase identifiers (which its JSON never
  // holds), a misspelling.
  ExpectError(Keras3("STFT"), at + "STFT is not supported " + supported);
  ExpectError("heNormal", at + "\"heNormal\" is not supported " + supported);
  ExpectError("LeCunNormal",
              at + "\"LeCunNormal\" is not supported " + supported);
  ExpectError("he_normalv2",
              at + "\"he_normalv2\" is not supported " + supported);
}

// ParseRegularizer on {"kernel_regularizer": <value>}.
absl::StatusOr<Regularizer> ParseKernelRegularizer(const Json& value) {
  const Json layer = {{"kernel_regularizer", value}};
  const KerasFields fields(layer, kWhere);
  return ParseRegularizer(fields, "kernel_regularizer");
}

// Keras's classes, their snake_case names and bare strings, with Keras's
// defaults (L1 0.01, L2 0.01, L1L2 0 and 0), as both Keras versions and
// TF.js write them.
TEST(ParseRegularizer, EveryFormWithKerasDefaults) {
  const struct {
    const char* json;
    float l1, l2;
  } cases[] = {
      {R"(null)", 0, 0},
      {R"("l1")", 0.01f, 0},
      {R"("L2")", 0, 0.01f},
      {R"({"class_name": "L1", "config": {"l1": 0.5}})", 0.5f, 0},
      {R"({"class_name": "l2", "config": {}})", 0, 0.01f},
      {R"({"class_name": "L1L2", "config": {}})", 0, 0},
      {R"({"class_name": "l1_l2", "config": {"l1": 0.25, "l2": 0.125}})", 0.25f,
       0.125f},
      {R"({"module": "keras.regularizers", "class_name": "L1L2",
           "config": {"l1": 0.002, "l2": 0}, "registered_name": null})",
       0.002f, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.json);
    absl::StatusOr<Regularizer> r = ParseKernelRegularizer(Json::parse(c.json));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->l1, c.l1);
    EXPECT_EQ(r->l2, c.l2);
  }
}

TEST(ParseRegularizer, RefusesOtherClassesAndNegativeFactors) {
  absl::StatusOr<Regularizer> r = ParseKernelRegularizer(
      Json::parse(R"({"class_name": "OrthogonalRegularizer"})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            absl::StrCat(kWhere,
                         "kernel_regularizer OrthogonalRegularizer is not "
                         "supported (supported: L1, L2, L1L2)"));
  r = ParseKernelRegularizer(
      Json::parse(R"({"class_name": "L1", "config": {"l1": -0.1}})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.status().message(),
      absl::StrCat(kWhere, "kernel_regularizer.config.l1: -0.1 is negative"));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
