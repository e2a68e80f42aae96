#include "compute/cpu/openmp_wait_policy.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr char kProbe[] = "compute/cpu/openmp_wait_policy_probe";

// Runs the probe under `env` (a shell prefix such as "env -u X") with two
// arguments; returns its stdout and stderr together.
std::string RunProbe(const std::string& env) {
  const std::string command = absl::StrCat(env, " ", kProbe, " one two 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return "";
  std::string out;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    out.append(buffer.data(), n);
  }
  EXPECT_EQ(pclose(pipe), 0) << out;
  return out;
}

// libgomp itself reports the spin count we chose: the variable was set
// before it loaded, in a re-execution that kept the arguments.
TEST(ReexecWithOpenMpWaitPolicy, LibgompRunsWithOurSpinCount) {
  const std::string out = RunProbe("env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY");
  EXPECT_NE(out.find(absl::StrCat("GOMP_SPINCOUNT = '", kOpenMpSpinCount, "'")),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("args 3"), std::string::npos) << out;
}

// Without the re-execution libgomp would keep its default: the probe's
// finding above is not libgomp's own.
TEST(ReexecWithOpenMpWaitPolicy, DefaultDiffersFromOurs) {
  const std::string out =
      RunProbe("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=300000");
  EXPECT_NE(out.find("GOMP_SPINCOUNT = '300000'"), std::string::npos) << out;
}

// A user's own choice stands.
TEST(ReexecWithOpenMpWaitPolicy, KeepsTheUsersChoice) {
  std::string out = RunProbe("env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=ACTIVE");
  EXPECT_NE(out.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << out;
  EXPECT_EQ(out.find(absl::StrCat("GOMP_SPINCOUNT = '", kOpenMpSpinCount, "'")),
            std::string::npos)
      << out;
  out = RunProbe("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=77");
  EXPECT_NE(out.find("GOMP_SPINCOUNT = '77'"), std::string::npos) << out;
}

// In this process (no variable set by the test runner) it does nothing when
// a variable is set, and refuses an empty argv clearly.
TEST(ReexecWithOpenMpWaitPolicy, RefusesAnEmptyArgv) {
  unsetenv("GOMP_SPINCOUNT");
  unsetenv("OMP_WAIT_POLICY");
  char* argv[] = {nullptr};
  absl::Status status = ReexecWithOpenMpWaitPolicy(argv);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "ReexecWithOpenMpWaitPolicy: argv must hold the program name");
  EXPECT_EQ(getenv("GOMP_SPINCOUNT"), nullptr);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  EXPECT_TRUE(ReexecWithOpenMpWaitPolicy(argv).ok());  // Already chosen.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
