#include "common/host_port.h"

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pstrain {
namespace {

absl::Status Malformed(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed address \"", address, "\": ", why));
}

bool IsIpv4(const std::string& host) {
  in_addr addr;
  return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

// Rewrites an IPv6 address in its canonical compact form ("0:0::1" ->
// "::1"), so that one address has one spelling; false if it is not one.
bool CanonicalIpv6(std::string* host) {
  in6_addr addr;
  if (inet_pton(AF_INET6, host->c_str(), &addr) != 1) return false;
  char text[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, &addr, text, sizeof(text)) == nullptr) return false;
  *host = text;
  return true;
}

// RFC 1123 host name: dot-separated labels of letters, digits and hyphens,
// not starting or ending with a hyphen. Underscores are accepted too, as
// Docker Compose service names use them.
bool IsDnsName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  if (absl::EndsWith(host, ".")) host.remove_suffix(1);
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.size() > 63) return false;
    if (label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
    }
  }
  return true;
}

bool AllDigitsAndDots(absl::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && c != '.') return false;
  }
  return true;
}

}  // namespace

std::string HostPort::ToString() const {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  HostPort result;
  absl::string_view port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return Malformed(address, "'[' without ']'");
    }
    result.host = std::string(address.substr(1, close - 1));
    if (!CanonicalIpv6(&result.host)) {
      return Malformed(address, "not an IPv6 address in brackets");
    }
    absl::string_view rest = address.substr(close + 1);
    if (!absl::StartsWith(rest, ":")) {
      return Malformed(address, "missing port (expected host:port)");
    }
    port_text = rest.substr(1);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return Malformed(address, "missing port (expected host:port)");
    }
    absl::string_view host = address.substr(0, colon);
    if (absl::StrContains(host, ':')) {
      return Malformed(address, "an IPv6 host must be in brackets ([::1]:port)");
    }
    if (host.empty()) return Malformed(address, "empty host");
    result.host = std::string(host);
    if (AllDigitsAndDots(host) ? !IsIpv4(result.host) : !IsDnsName(host)) {
      return Malformed(address, absl::StrCat("host \"", host,
                                             "\" is neither an IPv4 address "
                                             "nor a DNS name"));
    }
    port_text = address.substr(colon + 1);
  }
  if (port_text.empty()) return Malformed(address, "empty port");
  for (char c : port_text) {
    if (!absl::ascii_isdigit(c)) {
      return Malformed(address,
                       absl::StrCat("port \"", port_text, "\" is not a number"));
    }
  }
  int port = 0;
  if (port_text.size() > 5 || !absl::SimpleAtoi(port_text, &port) ||
      port < 1 || port > 65535) {
    return Malformed(address, absl::StrCat("port ", port_text,
                                           " out of range 1-65535"));
  }
  result.port = port;
  return result;
}

}  // namespace pstrain
