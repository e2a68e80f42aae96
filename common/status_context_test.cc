#include "common/status_context.h"

#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(WithContext, PrefixesTheMessageAndKeepsCodeAndPayloads) {
  absl::Status status = absl::FailedPreconditionError("too stale");
  status.SetPayload("type.pstrain/kind", absl::Cord("x"));
  const absl::Status result = WithContext("ps 1", status);
  EXPECT_EQ(result.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(result.message(), "ps 1: too stale");
  EXPECT_EQ(result.GetPayload("type.pstrain/kind"), absl::Cord("x"));
}

TEST(WithContext, OkStaysOk) {
  EXPECT_TRUE(WithContext("ps 1", absl::OkStatus()).ok());
}

}  // namespace
}  // namespace pstrain
