// A task address from a cluster spec: "host:port".
//
// The host is an IPv4 address ("10.0.0.5"), an IPv6 address in brackets
// ("[fe80::1]"), or a DNS name such as a Kubernetes pod's
// ("trainer-worker-0.trainer.default.svc"). Ports are 1-65535.
#ifndef PSTRAIN_COMMON_HOST_PORT_H_
#define PSTRAIN_COMMON_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

struct HostPort {
  // Without brackets; an IPv6 address in its canonical compact form.
  std::string host;
  int port = 0;

  // "host:port", with brackets around an IPv6 host: parses back to itself.
  std::string ToString() const;

  friend bool operator==(const HostPort& a, const HostPort& b) {
    return a.host == b.host && a.port == b.port;
  }
};

// Parses "host:port". On failure, INVALID_ARGUMENT whose message quotes the
// address and says what is wrong ("missing port", "port 70000 out of range
// 1-65535", ...).
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_HOST_PORT_H_
