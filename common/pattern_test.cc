#include "common/pattern.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(Pattern, MatchesWholeOrAnywhere) {
  absl::StatusOr<std::shared_ptr<const re2::RE2>> re =
      CompilePattern("attention/(query|key|value)/kernel");
  ASSERT_TRUE(re.ok()) << re.status();
  EXPECT_TRUE(re2::RE2::FullMatch("attention/key/kernel", **re));
  EXPECT_FALSE(re2::RE2::FullMatch("x/attention/key/kernel", **re));
  EXPECT_TRUE(re2::RE2::PartialMatch("x/attention/key/kernel", **re));
  EXPECT_FALSE(re2::RE2::PartialMatch("attention/key/bias", **re));
  // Python's named groups, as Keras users write them.
  re = CompilePattern(R"(d(?P<n>\d+)/kernel)");
  ASSERT_TRUE(re.ok()) << re.status();
  EXPECT_TRUE(re2::RE2::FullMatch("d12/kernel", **re));
}

TEST(Pattern, RefusesBadSyntaxSayingWhy) {
  absl::StatusOr<std::shared_ptr<const re2::RE2>> re = CompilePattern("d1/(k");
  ASSERT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(re.status().message()),
              StartsWith("invalid regular expression: missing )"));
  // A backreference: ECMAScript's and Python's, not RE2's.
  EXPECT_EQ(CompilePattern(R"((a)\1)").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// std::regex crashed on the first two: its compiler and matcher recurse.
TEST(Pattern, DeepNestingLongNamesAndHugePatternsAreSafe) {
  const int depth = 100000;
  absl::StatusOr<std::shared_ptr<const re2::RE2>> nested =
      CompilePattern(std::string(depth, '(') + "a" + std::string(depth, ')'));
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_TRUE(re2::RE2::FullMatch("a", **nested));

  const std::string name = std::string(1 << 20, 'a') + "/kernel";
  absl::StatusOr<std::shared_ptr<const re2::RE2>> re =
      CompilePattern(".*kernel");
  ASSERT_TRUE(re.ok()) << re.status();
  EXPECT_TRUE(re2::RE2::FullMatch(name, **re));
  re = CompilePattern("(a|b)*/kernel");
  ASSERT_TRUE(re.ok()) << re.status();
  EXPECT_TRUE(re2::RE2::FullMatch(name, **re));

  re = CompilePattern(std::string(2 << 20, 'a'));
  ASSERT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(re.status().message()), HasSubstr("too large"));
  re = CompilePattern("(a{1000}){1000}");
  ASSERT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(re.status().message()),
              HasSubstr("invalid repetition size"));
}

}  // namespace
}  // namespace pstrain
