#include "common/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "common/process.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr size_t kMaxHeadBytes = 8 << 10;
// The longest a connection may take to send its request head, and then to
// take the answer: deadlines for the whole, not per read or write, so a
// client that trickles a byte at a time cannot hold the one thread.
constexpr absl::Duration kReadTime = absl::Seconds(2);
constexpr absl::Duration kWriteTime = absl::Seconds(5);

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT) or `deadline`;
// false at the deadline or on a poll error.
bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p = {fd, events, 0};
    const int n =
        poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

std::string Reply(int code, absl::string_view reason,
                  absl::string_view content_type, absl::string_view body,
                  absl::string_view extra_header = "") {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason,
                      "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\n", extra_header,
                      "Connection: close\r\n\r\n", body);
}

std::string PlainReply(int code, absl::string_view reason,
                       absl::string_view extra_header = "") {
  return Reply(code, reason, "text/plain; charset=utf-8",
               absl::StrCat(code, " ", reason, "\n"), extra_header);
}

// Sends `bytes` unless the client goes away or has not taken them all
// within kWriteTime.
void WriteAll(int fd, const std::string& bytes) {
  const absl::Time deadline = absl::Now() + kWriteTime;
  size_t done = 0;
  while (done < bytes.size()) {
    if (!WaitFor(fd, POLLOUT, deadline)) return;
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;  // the client is gone
    done += n;
  }
}

}  // namespace

std::string MetricsHttpResponse(const std::string& head,
                                const std::function<std::string()>& render) {
  const std::vector<absl::string_view> lines =
      absl::StrSplit(head, absl::ByString("\r\n"));
  const std::vector<absl::string_view> parts =
      absl::StrSplit(lines[0], ' ', absl::SkipEmpty());
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.") ||
      parts[1].empty() || parts[1][0] != '/') {
    return PlainReply(400, "Bad Request");
  }
  absl::string_view path = parts[1];
  path = path.substr(0, path.find('?'));  // a query string is ignored
  if (path != "/metrics") return PlainReply(404, "Not Found");
  if (parts[0] != "GET" && parts[0] != "HEAD") {
    return PlainReply(405, "Method Not Allowed", "Allow: GET, HEAD\r\n");
  }
  std::string response = Reply(200, "OK",
                               "text/plain; version=0.0.4; "
                               "charset=utf-8",
                               render());
  if (parts[0] == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
  return response;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> ServeMetricsOnPort(
    const std::string& host, int port, const MetricsRegistry* registry,
    const std::string& process) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port: ", port, " is not in [0, 65535] (0: no metrics)"));
  }
  if (port == 0) return std::unique_ptr<MetricsServer>();
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server,
                           MetricsServer::Start(host, port, registry));
  LogInfo(absl::StrCat(process, ": Prometheus metrics at http://",
                       HostPort{host, server->port()}.ToString(), "/metrics"));
  return server;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& host, int port, const MetricsRegistry* registry) {
  const std::string address = HostPort{host, port}.ToString();
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", port, " is not in [0, 65535]"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;  // IPv4 or IPv6, as the host resolves
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved =
      getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0 || found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("metrics address ", address, ": \"", host,
                     "\" does not resolve: ", gai_strerror(resolved)));
  }
  sockaddr_storage addr{};
  socklen_t length = found->ai_addrlen;
  std::memcpy(&addr, found->ai_addr, length);
  freeaddrinfo(found);
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("metrics address ", address,
                                            ": socket: ", strerror(errno)));
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0 ||
      listen(fd, 16) != 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on ", address, ": ", error));
  }
  length = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  const int bound_port =
      ntohs(addr.ss_family == AF_INET6
                ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("metrics: pipe: ", error));
  }
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(registry, fd, bound_port, wake[0], wake[1]));
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

MetricsServer::MetricsServer(const MetricsRegistry* registry, int listen_fd,
                             int port, int wake_read, int wake_write)
    : registry_(registry),
      listen_fd_(listen_fd),
      port_(port),
      wake_read_(wake_read),
      wake_write_(wake_write) {}

MetricsServer::~MetricsServer() {
  Stop();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

void MetricsServer::Stop() {
  if (!thread_.joinable()) return;
  const char byte = 0;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

void MetricsServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the client gave up meanwhile, or out of fds
    Answer(fd);
  }
}

void MetricsServer::Answer(int fd) {
  const absl::Time deadline = absl::Now() + kReadTime;
  std::string head;
  char buffer[1024];
  size_t end = std::string::npos;
  while (end == std::string::npos) {
    if (head.size() > kMaxHeadBytes) {
      WriteAll(fd, PlainReply(431, "Request Header Fields Too Large"));
      close(fd);
      return;
    }
    if (!WaitFor(fd, POLLIN, deadline)) {  // too slow: dropped
      close(fd);
      return;
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {  // closed early
      close(fd);
      return;
    }
    head.append(buffer, n);
    end = head.find("\r\n\r\n");
  }
  head.resize(end);
  WriteAll(fd,
           MetricsHttpResponse(head, [this] { return registry_->Render(); }));
  shutdown(fd, SHUT_WR);
  close(fd);
}

}  // namespace pstrain
