// gRPC settings every pstrain channel and server shares.
//
// Tensors travel in chunks of at most a few MB (proto/tensor.proto), so a
// message never needs to be large; the limit below leaves room for the
// default 4 MB chunks plus headers, and refuses anything far larger with
// RESOURCE_EXHAUSTED before it is buffered.
#ifndef PSTRAIN_COMMON_GRPC_OPTIONS_H_
#define PSTRAIN_COMMON_GRPC_OPTIONS_H_

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
std::shared_ptr<grpc::Channel> CreatePstrainChannel(
    const std::string& address, const GrpcSecurity& security = GrpcSecurity());

// Applies pstrain's limits to a server under construction.
void ConfigurePstrainServer(grpc::ServerBuilder* builder);

// Starts a server on `address` ("host:port"; port 0 picks one) with
// pstrain's limits, `services` and gRPC's standard health service (which
// Kubernetes probes use), behind `security`'s TLS when it has TLS (the
// services check its token themselves: CheckAuthToken). Sets *bound_port.
// UNAVAILABLE naming the address if it cannot listen; INVALID_ARGUMENT if
// `security` asks for TLS without a certificate, key and CA.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartPstrainServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    int* bound_port, const GrpcSecurity& security = GrpcSecurity());

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_GRPC_OPTIONS_H_
