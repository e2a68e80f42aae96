#include "common/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

int calls = 0;

absl::Status Fails() {
  ++calls;
  return absl::InvalidArgumentError("bad");
}

absl::Status Succeeds() {
  ++calls;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool ok) {
  ++calls;
  if (!ok) return absl::NotFoundError("no int");
  return std::make_unique<int>(7);
}

absl::Status RunBoth(bool first_ok) {
  PSTRAIN_RETURN_IF_ERROR(first_ok ? Succeeds() : Fails());
  PSTRAIN_RETURN_IF_ERROR(Succeeds());
  return absl::OkStatus();
}

absl::StatusOr<int> Twice(bool ok) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<int> value, MakeInt(ok));
  int doubled;
  PSTRAIN_ASSIGN_OR_RETURN(doubled, absl::StatusOr<int>(*value * 2));
  return doubled;
}

TEST(StatusMacros, ReturnIfErrorStopsAtFirstError) {
  calls = 0;
  absl::Status status = RunBoth(false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "bad");
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacros, ReturnIfErrorContinuesOnOk) {
  calls = 0;
  EXPECT_TRUE(RunBoth(true).ok());
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacros, AssignOrReturnMovesValueAndEvaluatesOnce) {
  calls = 0;
  absl::StatusOr<int> result = Twice(true);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 14);
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacros, AssignOrReturnPropagatesError) {
  absl::StatusOr<int> result = Twice(false);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(result.status().message(), "no int");
}

}  // namespace
}  // namespace pstrain
