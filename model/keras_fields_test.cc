#include "model/keras_fields.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

constexpr char kWhere[] = "model: layer 1 'c' (Conv2D): ";

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(KerasFields, AbsentAndNullFieldsTakeTheFallback) {
  const Json config = Json::parse(R"({"a": null})");
  const KerasFields fields(config, kWhere);
  EXPECT_EQ(*fields.Int("a", 1, 9, 4), 4);
  EXPECT_EQ(*fields.Int("b", 1, 9, 5), 5);
  EXPECT_EQ(*fields.String("a", "x"), "x");
  EXPECT_EQ(*fields.Bool("a", true), true);
  EXPECT_EQ(*fields.IntPair("a", std::make_pair(1, 2)), std::make_pair(1, 2));
  EXPECT_EQ(fields.Find("a"), nullptr);
  EXPECT_EQ(Message(fields.Int("b", 1, 9, std::nullopt).status()),
            "model: layer 1 'c' (Conv2D): b: missing");
  EXPECT_EQ(Message(fields.Int("a", 1, 9, std::nullopt).status()),
            "model: layer 1 'c' (Conv2D): a: expected an integer, got null");
}

TEST(KerasFields, IntChecksRangeWhateverTheJsonRepresentation) {
  const Json config =
      Json::parse(R"({"neg": -3, "big": 18446744073709551615, "ok": 7})");
  const KerasFields fields(config, kWhere);
  EXPECT_EQ(*fields.Int("ok", 1, 7, std::nullopt), 7);
  EXPECT_EQ(*fields.Int("neg", -3, 0, std::nullopt), -3);
  EXPECT_EQ(Message(fields.Int("neg", 1, 9, std::nullopt).status()),
            "model: layer 1 'c' (Conv2D): neg: -3 is out of range [1, 9]");
  EXPECT_EQ(Message(fields.Int("big", 1, 9, std::nullopt).status()),
            "model: layer 1 'c' (Conv2D): big: 18446744073709551615 is out "
            "of range [1, 9]");
  EXPECT_FALSE(IsIntegerIn(Json(2.0), 1, 9));
  EXPECT_TRUE(IsIntegerIn(Json(9u), 1, 9));
  EXPECT_FALSE(IsIntegerIn(Json(0u), 1, 9));
}

TEST(KerasFields, IntPairAcceptsAnIntegerOrTwo) {
  const Json config = Json::parse(R"({"k": 3, "s": [2, 1], "bad": [1.5, 2]})");
  const KerasFields fields(config, kWhere);
  EXPECT_EQ(*fields.IntPair("k", std::nullopt), std::make_pair(3, 3));
  EXPECT_EQ(*fields.IntPair("s", std::nullopt), std::make_pair(2, 1));
  EXPECT_EQ(Message(fields.IntPair("bad", std::nullopt).status()),
            "model: layer 1 'c' (Conv2D): bad: expected an integer or a list "
            "of 2 integers, got an array");
}

TEST(KerasFields, NestedObjectsNameTheirPath) {
  const Json config = Json::parse(R"({"init": {"class_name": "RandomUniform",
      "config": {"minval": "x"}}, "str": "zeros"})");
  const KerasFields fields(config, kWhere);
  const absl::StatusOr<KerasObject> init = fields.Object("init");
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_EQ(init->class_name, "RandomUniform");
  EXPECT_EQ(
      Message(
          fields.Nested(*init->config, "init").Number("minval", 0.0).status()),
      "model: layer 1 'c' (Conv2D): init.config.minval: expected a "
      "number, got a string");
  const absl::StatusOr<KerasObject> identifier = fields.Object("str");
  ASSERT_TRUE(identifier.ok());
  EXPECT_EQ(identifier->class_name, "zeros");
  EXPECT_TRUE(identifier->config->empty());
  EXPECT_EQ(fields.Object("absent")->class_name, "");
}

TEST(KerasFields, RefusesCustomClasses) {
  const Json keras3 =
      Json::parse(R"({"module": "keras.layers", "registered_name": null})");
  EXPECT_TRUE(KerasFields(keras3, kWhere).ExpectKerasClass("Dense").ok());
  const Json keras30 = Json::parse(
      R"({"module": "keras.src.layers.core.dense", "registered_name": "Dense"})");
  EXPECT_TRUE(KerasFields(keras30, kWhere).ExpectKerasClass("Dense").ok());
  const Json custom =
      Json::parse(R"({"module": "keras_extras", "registered_name": null})");
  EXPECT_EQ(Message(KerasFields(custom, kWhere).ExpectKerasClass("Dense")),
            "model: layer 1 'c' (Conv2D): custom class \"Dense\" (module "
            "\"keras_extras\") is not supported");
}

TEST(DescribeJson, QuotesStringsAndNamesKerasObjects) {
  EXPECT_EQ(DescribeJson(Json("same")), "\"same\"");
  EXPECT_EQ(DescribeJson(Json::parse(R"({"class_name": "L1"})")), "L1");
  EXPECT_EQ(DescribeJson(Json::parse(R"([2, null, "a"])")), "[2, null, \"a\"]");
  EXPECT_EQ(DescribeJson(Json(false)), "false");
  EXPECT_EQ(DescribeJson(Json::object()), "{...}");
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
