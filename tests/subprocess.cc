#include "tests/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace pstrain {
namespace testing {

namespace {

int KernelChosenPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("PickFreePort");
    std::abort();
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

int PickFreePort() {
  // The kernel may hand a just-released port out again (seen: a cluster's
  // ps got its chief's port), so a process never gets one port twice here.
  ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
  static std::set<int>* const given = new std::set<int>();
  absl::MutexLock lock(&mu);
  while (true) {
    const int port = KernelChosenPort();
    if (given->insert(port).second) return port;
  }
}

std::string RunfilePath(const std::string& workspace_path) {
  if (!workspace_path.empty() && workspace_path[0] == '/') {
    return workspace_path;
  }
  const char* root = std::getenv("TEST_SRCDIR");
  return std::string(root == nullptr ? "." : root) + "/pstrain/" + workspace_path;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir == nullptr ? "/tmp" : dir) + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return out.good();
}

Subprocess Subprocess::Start(const std::string& binary,
                             const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env,
                             const std::string& log_path) {
  const std::string path = RunfilePath(binary);
  std::vector<std::string> argv_strings = {path};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::abort();
  }
  if (pid == 0) {
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
    }
    // The test may have blocked signals; the child starts clean.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(path.c_str(), argv.data());
    std::perror(("exec " + path).c_str());
    _exit(127);
  }
  return Subprocess(pid, log_path);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_),
      log_path_(std::move(other.log_path_)),
      exit_code_(other.exit_code_) {
  other.pid_ = -1;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && exit_code_ == -2) Stop(SIGKILL, 10);
}

int Subprocess::Wait(double timeout_seconds) {
  if (exit_code_ != -2) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_seconds);
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      exit_code_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Subprocess::Stop(int signal, double timeout_seconds) {
  if (exit_code_ == -2) kill(pid_, signal);
  return Wait(timeout_seconds);
}

}  // namespace testing
}  // namespace pstrain
