#include "common/host_port.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

void ExpectParses(const std::string& address, const std::string& host,
                  int port) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  ASSERT_TRUE(parsed.ok()) << address << ": " << parsed.status();
  EXPECT_EQ(parsed->host, host);
  EXPECT_EQ(parsed->port, port);
  EXPECT_EQ(parsed->ToString(), address);
}

void ExpectError(const std::string& address, const std::string& message) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  ASSERT_FALSE(parsed.ok()) << address;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), message);
}

TEST(HostPort, ParsesIpv4Ipv6AndDnsNames) {
  ExpectParses("127.0.0.1:2222", "127.0.0.1", 2222);
  ExpectParses("[::1]:1", "::1", 1);
  ExpectParses("[fe80::a:b:c]:65535", "fe80::a:b:c", 65535);
  ExpectParses("localhost:20000", "localhost", 20000);
  ExpectParses("host1:2222", "host1", 2222);
  ExpectParses("mnist-worker-0.mnist.kubeflow.svc:2222",
               "mnist-worker-0.mnist.kubeflow.svc", 2222);
  ExpectParses("trainer-ps-1.trainer.default.svc.cluster.local.:2222",
               "trainer-ps-1.trainer.default.svc.cluster.local.", 2222);
  ExpectParses("project_worker_1:8000", "project_worker_1", 8000);
}

TEST(HostPort, CanonicalizesIpv6) {
  absl::StatusOr<HostPort> parsed = ParseHostPort("[0:0:0::0:1]:80");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->host, "::1");
  EXPECT_EQ(parsed->ToString(), "[::1]:80");
}

TEST(HostPort, RefusesMalformedAddresses) {
  ExpectError("host1", "malformed address \"host1\": missing port (expected "
                       "host:port)");
  ExpectError("host1:", "malformed address \"host1:\": empty port");
  ExpectError(":2222", "malformed address \":2222\": empty host");
  ExpectError("::1:2222", "malformed address \"::1:2222\": an IPv6 host must "
                          "be in brackets ([::1]:port)");
  ExpectError("[::1:2222", "malformed address \"[::1:2222\": '[' without ']'");
  ExpectError("[::1]2222", "malformed address \"[::1]2222\": missing port "
                           "(expected host:port)");
  ExpectError("[host1]:2222", "malformed address \"[host1]:2222\": not an "
                              "IPv6 address in brackets");
  ExpectError("300.1.1.1:80", "malformed address \"300.1.1.1:80\": host "
                              "\"300.1.1.1\" is neither an IPv4 address nor "
                              "a DNS name");
  ExpectError("bad host:80", "malformed address \"bad host:80\": host \"bad "
                             "host\" is neither an IPv4 address nor a DNS "
                             "name");
  ExpectError("-lead.example:80", "malformed address \"-lead.example:80\": "
                                  "host \"-lead.example\" is neither an IPv4 "
                                  "address nor a DNS name");
  ExpectError("a..b:80", "malformed address \"a..b:80\": host \"a..b\" is "
                         "neither an IPv4 address nor a DNS name");
}

TEST(HostPort, RefusesPortsOutOfRange) {
  ExpectError("h:0", "malformed address \"h:0\": port 0 out of range 1-65535");
  ExpectError("h:65536",
              "malformed address \"h:65536\": port 65536 out of range 1-65535");
  ExpectError("h:99999999999", "malformed address \"h:99999999999\": port "
                               "99999999999 out of range 1-65535");
  ExpectError("h:-1", "malformed address \"h:-1\": port \"-1\" is not a number");
  ExpectError("h:22a", "malformed address \"h:22a\": port \"22a\" is not a "
                       "number");
}

}  // namespace
}  // namespace pstrain
