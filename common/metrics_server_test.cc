#include "common/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A socket connected to 127.0.0.1:port, or with `ipv6` to [::1]:port.
int Connect(int port, bool ipv6 = false) {
  const int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  sockaddr_in6 addr6{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  addr6.sin6_family = AF_INET6;
  addr6.sin6_port = htons(port);
  addr6.sin6_addr = in6addr_loopback;
  const int connected =
      ipv6 ? connect(fd, reinterpret_cast<sockaddr*>(&addr6), sizeof(addr6))
           : connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  EXPECT_EQ(connected, 0);
  return fd;
}

// Sends `request` to the server at port `port` of 127.0.0.1 (or of ::1) and
// returns everything it sends until it closes the connection.
std::string Exchange(int port, const std::string& request, bool ipv6 = false) {
  const int fd = Connect(port, ipv6);
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n =
        send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += n;
  }
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0)
    response.append(buffer, n);
  close(fd);
  return response;
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.AddCounter("pstrain_test_steps_total", "Steps.")
        ->Get()
        ->Increment(7);
    absl::StatusOr<std::unique_ptr<MetricsServer>> server =
        MetricsServer::Start("127.0.0.1", 0, &registry_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }
  MetricsRegistry registry_;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(MetricsServerTest, GetMetricsReturnsTheRendering) {
  const std::string response =
      Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(response, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(response, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(response, HasSubstr("Connection: close\r\n"));
  const std::string body = registry_.Render();
  EXPECT_THAT(response,
              HasSubstr(absl::StrCat("Content-Length: ", body.size())));
  EXPECT_THAT(response, EndsWith("\r\n\r\n" + body));
  EXPECT_THAT(body, HasSubstr("pstrain_test_steps_total 7\n"));
}

TEST_F(MetricsServerTest, ServesLaterValuesOnLaterScrapes) {
  registry_.AddGauge("g", "g")->Get()->Set(5);
  EXPECT_THAT(Exchange(server_->port(), "GET /metrics HTTP/1.0\r\n\r\n"),
              HasSubstr("\ng 5\n"));
  registry_.AddGauge("g2", "g")->Get()->Set(6);
  EXPECT_THAT(Exchange(server_->port(), "GET /metrics HTTP/1.0\r\n\r\n"),
              HasSubstr("\ng2 6\n"));
}

TEST_F(MetricsServerTest, OtherPathIs404) {
  EXPECT_THAT(Exchange(server_->port(), "GET / HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(Exchange(server_->port(), "GET /metricsx HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 404 "));
}

TEST_F(MetricsServerTest, OtherMethodIs405) {
  const std::string response = Exchange(
      server_->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_THAT(response, StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(response, HasSubstr("Allow: GET, HEAD\r\n"));
}

TEST_F(MetricsServerTest, MalformedRequestLineIs400) {
  EXPECT_THAT(Exchange(server_->port(), "HELLO\r\n\r\n"),
              StartsWith("HTTP/1.1 400 "));
}

TEST_F(MetricsServerTest, OversizedHeadIs431AndServerGoesOn) {
  const std::string huge =
      "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_THAT(Exchange(server_->port(), huge), StartsWith("HTTP/1.1 431 "));
  EXPECT_THAT(Exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 200 "));
}

TEST_F(MetricsServerTest, TricklingClientIsDroppedAndOthersAreServed) {
  // A request head sent a byte every 100 ms: it would take two minutes.
  const int slow = Connect(server_->port());
  const std::string head =
      "GET /metrics HTTP/1.1\r\nX-Padding: " + std::string(1200, 'a');
  const absl::Time start = absl::Now();
  bool dropped = false;
  for (size_t i = 0; i < head.size() && !dropped; ++i) {
    if (absl::Now() - start > absl::Seconds(20)) break;
    dropped = send(slow, &head[i], 1, MSG_NOSIGNAL) <= 0;
    pollfd p = {slow, POLLIN, 0};
    char byte;
    if (!dropped && poll(&p, 1, 100) > 0)
      dropped = recv(slow, &byte, 1, 0) <= 0;
  }
  const absl::Duration held = absl::Now() - start;
  close(slow);
  EXPECT_TRUE(dropped) << "still connected after " << held;
  // Dropped at the 2 s deadline (give or take a busy machine's delays).
  EXPECT_LT(held, absl::Seconds(8));
  EXPECT_THAT(Exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 200 "));
}

TEST_F(MetricsServerTest, StopClosesThePort) {
  const int port = server_->port();
  server_->Stop();
  server_->Stop();  // idempotent
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  // Still bound until destroyed, but no longer answering: the listen socket
  // is closed with the server.
  server_.reset();
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

TEST(MetricsServer, BadAddressIsRefusedWithItsName) {
  MetricsRegistry registry;
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("no-such-host.invalid", 0, &registry);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("no-such-host.invalid"));
  EXPECT_FALSE(MetricsServer::Start("127.0.0.1", 70000, &registry).ok());
}

TEST(MetricsServer, ServesOnAnIpv6Address) {
  // A cluster whose TF_CONFIG addresses are IPv6 ("[::1]:2222").
  MetricsRegistry registry;
  registry.AddCounter("pstrain_test_steps_total", "Steps.")
      ->Get()
      ->Increment(3);
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("::1", 0, &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string response =
      Exchange((*server)->port(), "GET /metrics HTTP/1.1\r\n\r\n",
               /*ipv6=*/true);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 200 "));
  EXPECT_THAT(response, HasSubstr("\npstrain_test_steps_total 3\n"));
}

TEST(MetricsServer, PortInUseIsRefused) {
  MetricsRegistry registry;
  auto first = MetricsServer::Start("127.0.0.1", 0, &registry);
  ASSERT_TRUE(first.ok());
  auto second = MetricsServer::Start("127.0.0.1", (*first)->port(), &registry);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat(":", (*first)->port())));
}

TEST(MetricsHttpResponse, HeadHasNoBody) {
  const std::string response =
      MetricsHttpResponse("HEAD /metrics HTTP/1.1", [] { return "abc\n"; });
  EXPECT_THAT(response, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(response, HasSubstr("Content-Length: 4\r\n"));
  EXPECT_THAT(response, EndsWith("\r\n\r\n"));
}

}  // namespace
}  // namespace pstrain
