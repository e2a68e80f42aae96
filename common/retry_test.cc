#include "common/retry.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

RetryOptions Fast() {
  RetryOptions options;
  options.initial_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(4);
  options.retry_for = absl::Seconds(5);
  return options;
}

TEST(Retry, RetriesUnavailableUntilItSucceeds) {
  int calls = 0;
  absl::Status status = Retry(Fast(), [&] {
    return ++calls < 4 ? absl::UnavailableError("down") : absl::OkStatus();
  });
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(calls, 4);
}

TEST(Retry, CallsOnRetryBeforeEachAttemptAfterTheFirst) {
  RetryOptions options = Fast();
  int retries = 0;
  options.on_retry = [&retries] { ++retries; };
  int calls = 0;
  absl::Status status = Retry(options, [&] {
    return ++calls < 3 ? absl::UnavailableError("down") : absl::OkStatus();
  });
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(retries, 2);
}

TEST(Retry, ReturnsOtherErrorsAtOnce) {
  int calls = 0;
  absl::Status status = Retry(Fast(), [&] {
    ++calls;
    return absl::InvalidArgumentError("bad");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 1);
}

TEST(Retry, GivesUpAfterRetryFor) {
  RetryOptions options = Fast();
  options.retry_for = absl::Milliseconds(50);
  const absl::Time start = absl::Now();
  int calls = 0;
  absl::Status status = Retry(options, [&] {
    ++calls;
    return absl::UnavailableError("down");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_GT(calls, 5);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(Retry, BackoffGrowsToTheCapWithJitter) {
  RetryOptions options;
  options.initial_backoff = absl::Milliseconds(100);
  options.max_backoff = absl::Milliseconds(800);
  for (int i = 0; i < 100; ++i) {
    const absl::Duration first = Backoff(options, 1);
    EXPECT_GE(first, absl::Milliseconds(50));
    EXPECT_LT(first, absl::Milliseconds(150));
    const absl::Duration late = Backoff(options, 30);
    EXPECT_GE(late, absl::Milliseconds(400));
    EXPECT_LT(late, absl::Milliseconds(1200));
  }
}

}  // namespace
}  // namespace pstrain
