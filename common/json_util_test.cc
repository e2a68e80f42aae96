#include "common/json_util.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

using Json = nlohmann::json;

TEST(ParseJson, ReadsJsonAndSaysWhyNot) {
  absl::StatusOr<Json> value = ParseJson(R"({"b": [1, 2], "a": null})");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)["b"][1], 2);
  absl::StatusOr<nlohmann::ordered_json> ordered =
      ParseOrderedJson(R"({"b": 1, "a": 2})");
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  EXPECT_EQ(ordered->begin().key(), "b");
  value = ParseJson("{\"a\": 1,\n  \"b\" 2}");
  EXPECT_EQ(value.status(),
            absl::InvalidArgumentError(
                "parse error at line 2, column 7: syntax error while parsing "
                "object separator - unexpected number literal; expected ':'"));
}

TEST(ParseJson, RefusesTextNestedTooDeep) {
  // kMaxJsonDepth levels of arrays, the innermost inside an object.
  const auto nested = [](int depth) {
    return "{\"a\": " + std::string(depth - 1, '[') +
           std::string(depth - 1, ']') + "}";
  };
  EXPECT_TRUE(ParseJson(nested(kMaxJsonDepth)).ok());
  EXPECT_TRUE(ParseOrderedJson(nested(kMaxJsonDepth)).ok());
  const absl::Status too_deep =
      absl::InvalidArgumentError("JSON nested more than 256 levels deep");
  EXPECT_EQ(ParseJson(nested(kMaxJsonDepth + 1)).status(), too_deep);
  EXPECT_EQ(ParseOrderedJson(nested(kMaxJsonDepth + 1)).status(), too_deep);
  // As deep as dump() overflowed the stack at; read without a crash.
  EXPECT_EQ(ParseJson(nested(100000)).status(), too_deep);
}

TEST(JsonGot, NamesTheTypeWithItsArticle) {
  EXPECT_EQ(JsonGot(Json("x")), "got a string");
  EXPECT_EQ(JsonGot(Json(3)), "got a number");
  EXPECT_EQ(JsonGot(Json::array()), "got an array");
  EXPECT_EQ(JsonGot(Json::object()), "got an object");
  EXPECT_EQ(JsonGot(Json(nullptr)), "got null");
  EXPECT_EQ(JsonGot(Json(true)), "got a boolean");
}

}  // namespace
}  // namespace pstrain
