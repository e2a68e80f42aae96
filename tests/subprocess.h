// Starting the project's binaries as real processes from tests.
//
//   Subprocess ps = Subprocess::Start("ps/ps", {"--port=0"},
//                                     {{"TF_CONFIG", json}}, "ps0.log");
//   ...
//   EXPECT_EQ(ps.Terminate(), 0);  // SIGTERM, then the exit status
#ifndef PSTRAIN_TESTS_SUBPROCESS_H_
#define PSTRAIN_TESTS_SUBPROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace pstrain {
namespace testing {

// A free TCP port on 127.0.0.1, chosen by the kernel (bound, then released),
// never one this process was given before.
int PickFreePort();

// The path of a binary of this workspace in the test's runfiles
// ("ps/ps" -> $TEST_SRCDIR/pstrain/ps/ps); an absolute path (a system
// binary) as it is.
std::string RunfilePath(const std::string& workspace_path);

// A file name in the test's scratch directory ($TEST_TMPDIR).
std::string TempPath(const std::string& name);

// The whole content of `path` ("" if unreadable).
std::string ReadFile(const std::string& path);
// Writes `content` to `path`, replacing it; false if it could not.
bool WriteFile(const std::string& path, const std::string& content);

class Subprocess {
 public:
  // Starts `binary` (a runfiles path) with `args` and `env` added to this
  // process's environment; stdout and stderr go to `log_path`.
  static Subprocess Start(const std::string& binary,
                          const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env,
                          const std::string& log_path);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&&) = delete;
  // Kills the process if still running.
  ~Subprocess();

  // Sends `signal` and returns the exit code (128 + signal if killed by one);
  // -1 if it did not exit within `timeout_seconds` (it is then SIGKILLed).
  int Stop(int signal, double timeout_seconds = 30);
  // Stop(SIGTERM).
  int Terminate() { return Stop(15); }
  // Waits for the process to exit by itself; as Stop for the result.
  int Wait(double timeout_seconds = 30);

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

 private:
  Subprocess(pid_t pid, std::string log_path)
      : pid_(pid), log_path_(std::move(log_path)) {}

  pid_t pid_;
  std::string log_path_;
  int exit_code_ = -2;  // -2: not reaped yet
};

}  // namespace testing
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_SUBPROCESS_H_
