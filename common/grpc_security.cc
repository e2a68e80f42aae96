#include "common/grpc_security.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/read_file.h"
#include "grpc/grpc_security_constants.h"

namespace pstrain {
namespace {

// Far more than any certificate chain, key or token; a bigger file is the
// wrong file.
constexpr size_t kMaxFileBytes = 1 << 20;

absl::Status FlagError(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", problem));
}

// The content of `path`, named by `flag` in errors (which never quote the
// content: it may be a secret).
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag,
                                         const std::string& path) {
  absl::StatusOr<std::string> content = ReadFileAtMost(path, kMaxFileBytes);
  if (!content.ok()) return FlagError(flag, content.status().message());
  if (content->empty()) return FlagError(flag, absl::StrCat(path, " is empty"));
  return content;
}

absl::StatusOr<std::string> ReadCertificates(absl::string_view flag,
                                             const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFlagFile(flag, path);
  if (pem.ok() && !absl::StrContains(*pem, "-----BEGIN CERTIFICATE-----")) {
    return FlagError(flag, absl::StrCat(path, " holds no PEM certificate"));
  }
  return pem;
}

absl::StatusOr<std::string> ReadPrivateKey(absl::string_view flag,
                                           const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFlagFile(flag, path);
  if (!pem.ok()) return pem;
  if (absl::StrContains(*pem, "-----BEGIN ENCRYPTED PRIVATE KEY-----")) {
    return FlagError(flag, absl::StrCat(path,
                                        " holds an encrypted key; gRPC "
                                        "needs it unencrypted"));
  }
  if (!absl::StrContains(*pem, "PRIVATE KEY-----")) {
    return FlagError(flag, absl::StrCat(path, " holds no PEM private key"));
  }
  return pem;
}

absl::StatusOr<std::string> ReadToken(absl::string_view flag,
                                      const std::string& path) {
  absl::StatusOr<std::string> token = ReadFlagFile(flag, path);
  if (!token.ok()) return token;
  // The newline (or CRLF) editors and `echo` leave at the end.
  token->erase(absl::StripTrailingAsciiWhitespace(*token).size());
  if (token->empty()) return FlagError(flag, absl::StrCat(path, " is empty"));
  for (const char c : *token) {
    // What an HTTP/2 header value may hold (gRPC refuses anything else).
    if (c < 0x20 || c > 0x7e) {
      return FlagError(flag, absl::StrCat(path,
                                          " holds a character other than "
                                          "printable ASCII"));
    }
  }
  return token;
}

// Adds "authorization: Bearer <token>" to a call's initial metadata.
class AuthTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit AuthTokenInterceptor(const std::string* value) : value_(value) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthMetadataKey, *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const value_;  // owned by the factory
};

// Owned by the channel, which outlives its calls and their interceptors.
class AuthTokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AuthTokenInterceptorFactory(absl::string_view token)
      : value_(absl::StrCat(kAuthBearerPrefix, token)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new AuthTokenInterceptor(&value_);
  }

 private:
  const std::string value_;
};

}  // namespace

absl::StatusOr<GrpcSecurity> LoadGrpcSecurity(const GrpcSecurityFiles& files) {
  GrpcSecurity security;
  const bool cert = !files.tls_cert.empty();
  const bool key = !files.tls_key.empty();
  const bool ca = !files.tls_ca.empty();
  if (cert || key || ca) {
    // Mutual TLS needs all three: a server without a CA could not check its
    // clients, a client without a certificate would be refused.
    constexpr absl::string_view kTogether =
        "missing (mutual TLS needs --tls_cert, --tls_key and --tls_ca "
        "together)";
    if (!cert) return FlagError("--tls_cert", kTogether);
    if (!key) return FlagError("--tls_key", kTogether);
    if (!ca) return FlagError("--tls_ca", kTogether);
    absl::StatusOr<std::string> pem =
        ReadCertificates("--tls_cert", files.tls_cert);
    if (!pem.ok()) return pem.status();
    security.tls_cert_pem = *std::move(pem);
    pem = ReadPrivateKey("--tls_key", files.tls_key);
    if (!pem.ok()) return pem.status();
    security.tls_key_pem = *std::move(pem);
    pem = ReadCertificates("--tls_ca", files.tls_ca);
    if (!pem.ok()) return pem.status();
    security.tls_ca_pem = *std::move(pem);
  }
  if (!files.auth_token_file.empty()) {
    absl::StatusOr<std::string> token =
        ReadToken("--auth_token_file", files.auth_token_file);
    if (!token.ok()) return token.status();
    security.auth_token = *std::move(token);
  }
  if (!files.chief_token_file.empty()) {
    if (security.auth_token.empty()) {
      return FlagError("--chief_token_file",
                       "needs --auth_token_file (the token of every task)");
    }
    absl::StatusOr<std::string> token =
        ReadToken("--chief_token_file", files.chief_token_file);
    if (!token.ok()) return token.status();
    if (*token == security.auth_token) {
      return FlagError(
          "--chief_token_file",
          "the chief's token must differ from --auth_token_file's");
    }
    security.chief_token = *std::move(token);
  }
  return security;
}

std::string DescribeGrpcSecurity(const GrpcSecurity& security) {
  if (security.tls()) {
    return security.auth_token.empty() ? "mutual TLS"
                                       : "mutual TLS, auth token";
  }
  return security.auth_token.empty() ? "insecure" : "auth token";
}

std::shared_ptr<grpc::ChannelCredentials> PstrainChannelCredentials(
    const GrpcSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.tls_ca_pem;
  options.pem_private_key = security.tls_key_pem;
  options.pem_cert_chain = security.tls_cert_pem;
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>
PstrainServerCredentials(const GrpcSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  if (security.tls_cert_pem.empty() || security.tls_key_pem.empty() ||
      security.tls_ca_pem.empty()) {
    return absl::InvalidArgumentError(
        "a TLS server needs a certificate, its key and the cluster CA");
  }
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.tls_ca_pem;
  options.pem_key_cert_pairs.push_back(
      {security.tls_key_pem, security.tls_cert_pem});
  return grpc::SslServerCredentials(options);
}

std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
AuthTokenInterceptors(const GrpcSecurity& security) {
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  const std::string& token = security.is_chief && !security.chief_token.empty()
                                 ? security.chief_token
                                 : security.auth_token;
  if (!token.empty()) {
    interceptors.push_back(
        std::make_unique<AuthTokenInterceptorFactory>(token));
  }
  return interceptors;
}

absl::Status CheckAuthToken(const grpc::ServerContextBase& context,
                            absl::string_view token) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto [begin, end] = metadata.equal_range(kAuthMetadataKey);
  if (begin == end) {
    return absl::UnauthenticatedError("this server needs an auth token");
  }
  if (std::next(begin) != end) {
    return absl::UnauthenticatedError("more than one auth token");
  }
  const absl::string_view value(begin->second.data(), begin->second.size());
  if (!absl::StartsWith(value, kAuthBearerPrefix) ||
      !ConstantTimeEquals(value.substr(sizeof(kAuthBearerPrefix) - 1), token)) {
    return absl::UnauthenticatedError("wrong auth token");
  }
  return absl::OkStatus();
}

absl::StatusOr<Caller> AuthenticateCaller(
    const grpc::ServerContextBase& context, const GrpcSecurity& security,
    absl::string_view chief_host) {
  bool chief = true;
  // A chief token comes with a task token (LoadGrpcSecurity).
  if (!security.auth_token.empty()) {
    const bool by_chief_token =
        !security.chief_token.empty() &&
        CheckAuthToken(context, security.chief_token).ok();
    if (!by_chief_token) {
      absl::Status checked = CheckAuthToken(context, security.auth_token);
      if (!checked.ok()) return checked;
    }
    if (!security.chief_token.empty()) chief = by_chief_token;
  }
  if (security.tls() && !chief_host.empty()) {
    bool named = false;
    const std::shared_ptr<const grpc::AuthContext> auth =
        context.auth_context();
    if (auth != nullptr) {
      for (const char* property :
           {GRPC_X509_SAN_PROPERTY_NAME, GRPC_X509_CN_PROPERTY_NAME}) {
        for (const grpc::string_ref& name :
             auth->FindPropertyValues(property)) {
          named |= CertificateNameCovers(
              absl::string_view(name.data(), name.size()), chief_host);
        }
      }
    }
    chief &= named;
  }
  return chief ? Caller::kChief : Caller::kTask;
}

bool CertificateNameCovers(absl::string_view name, absl::string_view host) {
  if (absl::EqualsIgnoreCase(name, host)) return true;
  if (!absl::ConsumePrefix(&name, "*.")) return false;
  const size_t dot = host.find('.');
  return dot != absl::string_view::npos && dot > 0 &&
         absl::EqualsIgnoreCase(host.substr(dot + 1), name);
}

bool ConstantTimeEquals(absl::string_view given, absl::string_view secret) {
  // Every byte of `secret` is compared, whatever differs first; volatile
  // keeps the compiler from turning the loop into an early exit.
  volatile unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char g =
        i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | (g ^ static_cast<unsigned char>(secret[i]));
  }
  return diff == 0;
}

}  // namespace pstrain
