#include "common/file_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string Path(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(FileLock, ASecondHolderIsRefusedWithTheFirstsDescription) {
  const std::string path = Path("a.lock");
  auto first = FileLock::Acquire(path, "chief pid 1 (run a)");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = FileLock::Acquire(path, "chief pid 2 (run b)");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            path + " is held by chief pid 1 (run a)");
  first->reset();  // released
  auto third = FileLock::Acquire(path, "chief pid 3");
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(FileLock, ADeadHoldersLockIsFree) {
  const std::string path = Path("b.lock");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Takes the lock and dies without releasing it.
    auto lock = FileLock::Acquire(path, "the child");
    if (!lock.ok()) _exit(1);
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto lock = FileLock::Acquire(path, "the parent");
  EXPECT_TRUE(lock.ok()) << lock.status();
}

TEST(FileLock, AFileThatCannotBeOpenedIsNamed) {
  auto lock = FileLock::Acquire("/nonexistent-dir/x.lock", "me");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(lock.status().message(),
            "open /nonexistent-dir/x.lock: No such file or directory");
}

}  // namespace
}  // namespace pstrain
