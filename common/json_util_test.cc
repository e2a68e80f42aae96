#include "common/json_util.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

using Json = nlohmann::json;

TEST(JsonParseError, GivesLineAndColumnWithoutTheExceptionId) {
  EXPECT_EQ(JsonParseError("{\"a\": 1,\n  \"b\" 2}"),
            "parse error at line 2, column 7: syntax error while parsing "
            "object separator - unexpected number literal; expected ':'");
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
