#include "common/exit_status.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::internal::CaptureStderr;
using ::testing::internal::GetCapturedStderr;

TEST(ExitStatus, FailUsageWritesTheLineAloneAndReturnsTwo) {
  CaptureStderr();
  const int status = FailUsage("--port: -1 must be in [0, 65535]");
  EXPECT_EQ(GetCapturedStderr(), "--port: -1 must be in [0, 65535]\n");
  EXPECT_EQ(status, 2);
}

TEST(ExitStatus, FailTaskLogsAnErrorNamingTheTaskAndReturnsOne) {
  CaptureStderr();
  const int status = FailTask("worker 3", "the run did not start: FAILED");
  const std::string line = GetCapturedStderr();
  EXPECT_EQ(status, 1);
  // A log line: "E<date> <time> <message>\n".
  EXPECT_TRUE(absl::StartsWith(line, "E")) << line;
  EXPECT_TRUE(
      absl::EndsWith(line, " worker 3: the run did not start: FAILED\n"))
      << line;
}

TEST(ExitStatus, FailStartTreatsInvalidArgumentAsTheUsersInput) {
  CaptureStderr();
  const int status = FailStart(
      absl::InvalidArgumentError("--metrics_port: 70000 is not in [0, 65535]"),
      "ps 0");
  EXPECT_EQ(GetCapturedStderr(),
            "--metrics_port: 70000 is not in [0, 65535]\n");
  EXPECT_EQ(status, 2);
}

TEST(ExitStatus, FailStartTreatsOtherCodesAsTheTaskFailing) {
  for (const absl::Status& error :
       {absl::UnavailableError("cannot listen on 0.0.0.0:9100"),
        absl::InternalError("cannot listen on 0.0.0.0:9100"),
        absl::FailedPreconditionError("cannot listen on 0.0.0.0:9100")}) {
    CaptureStderr();
    const int status = FailStart(error, "ps 1");
    const std::string line = GetCapturedStderr();
    EXPECT_EQ(status, 1) << error;
    EXPECT_TRUE(absl::StartsWith(line, "E")) << line;
    EXPECT_TRUE(absl::EndsWith(line, " ps 1: cannot listen on 0.0.0.0:9100\n"))
        << line;
  }
}

}  // namespace
}  // namespace pstrain
