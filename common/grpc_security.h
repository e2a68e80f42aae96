// Who may talk to a pstrain process: mutual TLS with the cluster's CA, a
// shared token on every call, or both.
//
// main() turns its flags into a GrpcSecurity once; every channel and server
// of the process then takes it (common/grpc_options.h):
//
//   GrpcSecurityFiles files;            // paths, from --tls_cert etc.
//   files.tls_cert = absl::GetFlag(FLAGS_tls_cert);
//   ...
//   absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(files);
//   if (!security.ok()) return Fail(security.status().message());
//   auto channel = CreatePstrainChannel(address, *security);
//
// With TLS, servers refuse a peer without a certificate signed by the
// cluster CA, and clients check the server's certificate against the same CA
// (and its name against the address). With a token, clients send it as
// "authorization: Bearer <token>" on every call (a channel interceptor adds
// it, so raw and generic calls carry it too), and each service handler calls
// CheckAuthToken before it touches state. gRPC's health service is not
// checked, so Kubernetes probes keep working.
//
// Secrets (the token, the private key) are never put into a status message or
// a log line; errors name the file, not its content.
#ifndef PSTRAIN_COMMON_GRPC_SECURITY_H_
#define PSTRAIN_COMMON_GRPC_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"

namespace pstrain {

// The files a process's security comes from ("" where not given). The TLS
// files are PEM; the token file holds the token (trailing whitespace, such as
// the newline an editor adds, is dropped). A main.cc fills it from its flags
// in this order: {--tls_cert, --tls_key, --tls_ca, --auth_token_file,
// --chief_token_file}.
struct GrpcSecurityFiles {
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  std::string auth_token_file;
  std::string chief_token_file;
};

// What the files held. The default is no TLS and no token: insecure channels
// and servers, as before security existed (tests, benchmarks).
struct GrpcSecurity {
  std::string tls_cert_pem;  // this process's certificate (chain)
  std::string tls_key_pem;   // its private key
  std::string tls_ca_pem;    // the cluster CA: the only issuer trusted
  std::string auth_token;    // "" : no token sent nor checked
  // The chief's own token ("" : none): the chief sends it instead of
  // auth_token, and ps tasks accept the chief's methods only with it.
  // Workers are not given it.
  std::string chief_token;
  // This process is the chief: its calls carry chief_token.
  bool is_chief = false;

  bool tls() const { return !tls_ca_pem.empty() || !tls_cert_pem.empty(); }
};

// Reads `files`. INVALID_ARGUMENT, one line starting with the flag's name
// ("--tls_key: ..."), when the TLS files are not all three given or none,
// a file cannot be read or is empty, a PEM file holds no certificate or key
// of the right kind, or the token holds characters gRPC metadata cannot carry.
absl::StatusOr<GrpcSecurity> LoadGrpcSecurity(const GrpcSecurityFiles& files);

// For log lines: "mutual TLS, auth token", "mutual TLS", "auth token" or
// "insecure" (never the token itself).
std::string DescribeGrpcSecurity(const GrpcSecurity& security);

// Channel credentials for `security`: TLS trusting only tls_ca_pem and
// presenting tls_cert_pem/tls_key_pem when set (a client without them sends
// no certificate), else insecure.
std::shared_ptr<grpc::ChannelCredentials> PstrainChannelCredentials(
    const GrpcSecurity& security);

// Server credentials for `security`: TLS with tls_cert_pem/tls_key_pem that
// requires and verifies a client certificate signed by tls_ca_pem, else
// insecure. INVALID_ARGUMENT if TLS is asked for without a certificate, key
// and CA.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>
PstrainServerCredentials(const GrpcSecurity& security);

// The metadata key the token travels under, and the value's prefix.
inline constexpr char kAuthMetadataKey[] = "authorization";
inline constexpr char kAuthBearerPrefix[] = "Bearer ";

// Client interceptors that add the token to every call; none without one.
std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
AuthTokenInterceptors(const GrpcSecurity& security);

// OK if `token` is empty (no token required) or the call carries exactly one
// "authorization: Bearer <token>" entry; UNAUTHENTICATED otherwise (the
// message never repeats either token). The comparison takes the same time
// wherever the tokens differ.
absl::Status CheckAuthToken(const grpc::ServerContextBase& context,
                            absl::string_view token);

// Who made a call, as far as a ps task's chief-only methods care.
enum class Caller { kTask, kChief };

// Who made the call, by what it proved:
// - a token is required when `security` has one: UNAUTHENTICATED unless
//   the call carries auth_token or chief_token;
// - it is the chief if every configured proof says so: with a chief_token,
//   the call carried it; with TLS and a `chief_host`, the client
//   certificate names that host (a DNS or IP subject alternative name, or
//   a "*." wildcard covering it). With no security at all, anyone is.
absl::StatusOr<Caller> AuthenticateCaller(
    const grpc::ServerContextBase& context, const GrpcSecurity& security,
    absl::string_view chief_host);

// Whether certificate name `name` ("host", "*.domain", "10.0.0.1") names
// `host` (case-insensitive; a wildcard covers one leftmost label).
bool CertificateNameCovers(absl::string_view name, absl::string_view host);

// Whether `given` equals `secret`, in a time that depends only on the two
// lengths (not on where they differ).
bool ConstantTimeEquals(absl::string_view given, absl::string_view secret);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_GRPC_SECURITY_H_
