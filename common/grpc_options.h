// gRPC settings every pstrain channel and server shares.
//
// Tensors travel in chunks of at most a few MB (proto/tensor.proto), so a
// message never needs to be large; the limit below leaves room for the
// default 4 MB chunks plus headers, and refuses anything far larger with
// RESOURCE_EXHAUSTED before it is buffered.
#ifndef PSTRAIN_COMMON_GRPC_OPTIONS_H_
#define PSTRAIN_COMMON_GRPC_OPTIONS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/grpc_security.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

// Largest message a pstrain process sends or accepts.
inline constexpr int kMaxGrpcMessageBytes = 64 << 20;

// A channel to `address` ("host:port") with pstrain's limits, secured as
// `security` says (TLS, and the auth token on every call). The default,
// insecure and without a token, is for tests and benchmarks; the binaries
// pass the GrpcSecurity their flags gave.
//
// To a loopback address, the channel goes over the server's local socket
// (see StartPstrainServer) if one listens when the channel is created, with
// 4 MB socket buffers: bulk same-host ps traffic then takes about a quarter
// less CPU than over loopback TCP. Otherwise (a server not yet up, or not a
// pstrain server, e.g. a port forward) it uses TCP for its whole life, as
// to any other address.
std::shared_ptr<grpc::Channel> CreatePstrainChannel(
    const std::string& address, const GrpcSecurity& security = GrpcSecurity());

// Whether `address` ("host:port") names this host's loopback interface
// (127.0.0.0/8, ::1 or localhost).
bool IsLoopbackAddress(const std::string& address);

// The gRPC target of the local socket a pstrain server at loopback
// `address` also listens on ("unix-abstract:pstrain/<address>"), or "" when
// `address` is not a loopback address.
std::string LocalSocketTarget(const std::string& address);

// Applies pstrain's limits to a server under construction.
void ConfigurePstrainServer(grpc::ServerBuilder* builder);

// What a server may add to pstrain's defaults (StartPstrainServer).
struct PstrainServerOptions {
  // Registers what else the server serves with the builder before it starts
  // (an async generic service and its completion queue).
  std::function<void(grpc::ServerBuilder*)> register_more;
  // False leaves gRPC's health service out, for a server that answers
  // grpc.health.v1.Health itself (common/health_check.h).
  bool grpc_health = true;
  // At a loopback address with a fixed port, also listen on
  // LocalSocketTarget(address), which same-host clients then use
  // (CreatePstrainChannel). False keeps them on TCP, as peers on other hosts
  // are (for measuring the TCP path on one host).
  bool local_socket = true;
};

// Starts a server on `address` ("host:port"; port 0 picks one) with
// pstrain's limits, `services` and gRPC's standard health service (which
// Kubernetes probes use), behind `security`'s TLS when it has TLS (the
// services check its token themselves: CheckAuthToken). Sets *bound_port.
// At a loopback address with a fixed port it also listens on
// LocalSocketTarget(address), an abstract Unix socket (unless
// `options.local_socket` is false): like the loopback port, it is private to
// the host's network namespace, and it takes the same credentials.
// UNAVAILABLE naming the address if it cannot listen; INVALID_ARGUMENT if
// `security` asks for TLS without a certificate, key and CA.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartPstrainServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    int* bound_port, const GrpcSecurity& security = GrpcSecurity(),
    const PstrainServerOptions& options = PstrainServerOptions());

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_GRPC_OPTIONS_H_
