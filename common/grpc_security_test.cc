#include "common/grpc_security.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/server_callback.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

constexpr char kCert[] =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
constexpr char kKey[] =
    "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

std::string WriteTemp(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  std::fwrite(content.data(), 1, content.size(), f);
  std::fclose(f);
  return path;
}

TEST(LoadGrpcSecurity, NoFilesMeansInsecureWithoutToken) {
  absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity({});
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_FALSE(security->tls());
  EXPECT_EQ(security->auth_token, "");
}

TEST(LoadGrpcSecurity, ReadsTheThreeTlsFiles) {
  GrpcSecurityFiles files;
  files.tls_cert = WriteTemp("cert.pem", kCert);
  files.tls_key = WriteTemp("key.pem", kKey);
  files.tls_ca = WriteTemp("ca.pem", kCert);
  absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(files);
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_TRUE(security->tls());
  EXPECT_EQ(security->tls_cert_pem, kCert);
  EXPECT_EQ(security->tls_key_pem, kKey);
  EXPECT_EQ(security->tls_ca_pem, kCert);
}

TEST(LoadGrpcSecurity, TokenLosesItsTrailingNewline) {
  GrpcSecurityFiles files;
  files.auth_token_file = WriteTemp("token", "s3cret-token\r\n");
  absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(files);
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_EQ(security->auth_token, "s3cret-token");
  EXPECT_FALSE(security->tls());
}

TEST(LoadGrpcSecurity, BadCombinationsNameTheFlag) {
  const std::string cert = WriteTemp("cert2.pem", kCert);
  const std::string key = WriteTemp("key2.pem", kKey);
  struct Case {
    GrpcSecurityFiles files;
    std::string error;
  };
  const std::string missing =
      ": missing (mutual TLS needs --tls_cert, --tls_key and --tls_ca "
      "together)";
  const Case cases[] = {
      {{cert, "", cert, "", ""}, "--tls_key" + missing},
      {{"", key, cert, "", ""}, "--tls_cert" + missing},
      {{cert, key, "", "", ""}, "--tls_ca" + missing},
      {{"", "", cert, "", ""}, "--tls_cert" + missing},
      {{cert, key, "/nonexistent/ca.pem", "", ""},
       "--tls_ca: cannot read /nonexistent/ca.pem: No such file or directory"},
      {{cert, cert, cert, "", ""},
       absl::StrCat("--tls_key: ", cert, " holds no PEM private key")},
      {{key, key, cert, "", ""},
       absl::StrCat("--tls_cert: ", key, " holds no PEM certificate")},
      {{"", "", "", "/nonexistent/token", ""},
       "--auth_token_file: cannot read /nonexistent/token: No such file or "
       "directory"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(c.files);
    EXPECT_EQ(security.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(security.status().message(), c.error);
  }
}

TEST(LoadGrpcSecurity, EmptyTokenFileIsRefused) {
  for (const char* content : {"", "\n", "  \r\n"}) {
    GrpcSecurityFiles files;
    files.auth_token_file = WriteTemp("empty-token", content);
    absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(files);
    EXPECT_EQ(security.status().message(),
              absl::StrCat("--auth_token_file: ", files.auth_token_file,
                           " is empty"));
  }
}

TEST(LoadGrpcSecurity, ErrorsNeverQuoteTheSecret) {
  GrpcSecurityFiles files;
  files.auth_token_file = WriteTemp("bad-token", "hunter2\x01moresecret\n");
  absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(files);
  ASSERT_FALSE(security.ok());
  EXPECT_EQ(security.status().message(),
            absl::StrCat("--auth_token_file: ", files.auth_token_file,
                         " holds a character other than printable ASCII"));
  EXPECT_EQ(std::string(security.status().message()).find("hunter2"),
            std::string::npos);
}

TEST(LoadGrpcSecurity, EncryptedKeyIsRefused) {
  GrpcSecurityFiles files;
  files.tls_cert = WriteTemp("cert3.pem", kCert);
  files.tls_ca = files.tls_cert;
  files.tls_key = WriteTemp("enc.pem",
                            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMII\n"
                            "-----END ENCRYPTED PRIVATE KEY-----\n");
  EXPECT_EQ(LoadGrpcSecurity(files).status().message(),
            absl::StrCat("--tls_key: ", files.tls_key,
                         " holds an encrypted key; gRPC needs it unencrypted"));
}

TEST(CertificateNameCovers, ExactNamesAndOneLabelWildcards) {
  EXPECT_TRUE(CertificateNameCovers("localhost", "LocalHost"));
  EXPECT_TRUE(CertificateNameCovers("10.0.0.1", "10.0.0.1"));
  EXPECT_TRUE(CertificateNameCovers("*.pstrain-chief.ml.svc",
                                    "pstrain-chief-0.pstrain-chief.ml.svc"));
  // A wildcard covers one leftmost label, not more, not none.
  EXPECT_FALSE(CertificateNameCovers("*.ml.svc", "a.pstrain-chief.ml.svc"));
  EXPECT_FALSE(CertificateNameCovers("*.ml.svc", "ml.svc"));
  EXPECT_FALSE(CertificateNameCovers("*.pstrain-worker.ml.svc",
                                     "pstrain-chief-0.pstrain-chief.ml.svc"));
  EXPECT_FALSE(CertificateNameCovers("10.0.0.1", "10.0.0.12"));
  EXPECT_FALSE(CertificateNameCovers("", "localhost"));
}

TEST(ConstantTimeEquals, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
  EXPECT_FALSE(ConstantTimeEquals(std::string("ab\0", 3), "ab"));
}

TEST(PstrainServerCredentials, TlsNeedsCertificateKeyAndCa) {
  GrpcSecurity security;
  security.tls_ca_pem = kCert;
  EXPECT_EQ(PstrainServerCredentials(security).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PstrainServerCredentials(GrpcSecurity()).ok());
}

// A one-method service whose handler checks the token, as ps and chief
// handlers do; it echoes the request.
constexpr char kEchoMethod[] = "/pstrain.test.Echo/Echo";

class EchoService : public grpc::Service {
 public:
  explicit EchoService(std::string token) : token_(std::move(token)) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        kEchoMethod, grpc::internal::RpcMethod::NORMAL_RPC, nullptr));
    MarkMethodCallback(
        0, new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer,
                                                    grpc::ByteBuffer>(
               [this](grpc::CallbackServerContext* context,
                      const grpc::ByteBuffer* request,
                      grpc::ByteBuffer* response) {
                 absl::Status status = CheckAuthToken(*context, token_);
                 if (status.ok()) {
                   ++calls_served_;
                   *response = *request;
                 }
                 grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
                 reactor->Finish(ToGrpcStatus(status));
                 return reactor;
               }));
  }

  int calls_served() const { return calls_served_; }

 private:
  const std::string token_;
  std::atomic<int> calls_served_{0};
};

absl::Status CallEcho(const std::shared_ptr<grpc::Channel>& channel,
                      const std::string& extra_authorization = "") {
  const grpc::internal::RpcMethod method(
      kEchoMethod, grpc::internal::RpcMethod::NORMAL_RPC, channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  if (!extra_authorization.empty()) {
    context.AddMetadata(kAuthMetadataKey, extra_authorization);
  }
  grpc::Slice slice(std::string("ping"));
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  return FromGrpcStatus(
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), method, &context, request, &response));
}

TEST(CheckAuthToken, OnlyTheRightTokenIsServedAndHealthStaysOpen) {
  EchoService service("right-token");
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      StartPstrainServer("127.0.0.1:0", {&service}, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", port);

  GrpcSecurity right;
  right.auth_token = "right-token";
  GrpcSecurity wrong;
  wrong.auth_token = "wrong-token";
  GrpcSecurity prefix;
  prefix.auth_token = "right-toke";

  EXPECT_TRUE(CallEcho(CreatePstrainChannel(address, right)).ok());
  EXPECT_EQ(service.calls_served(), 1);
  const absl::Status missing = CallEcho(CreatePstrainChannel(address));
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated) << missing;
  const absl::Status bad = CallEcho(CreatePstrainChannel(address, wrong));
  EXPECT_EQ(bad.code(), absl::StatusCode::kUnauthenticated) << bad;
  EXPECT_EQ(std::string(bad.message()).find("right-token"), std::string::npos);
  EXPECT_EQ(std::string(bad.message()).find("wrong-token"), std::string::npos);
  EXPECT_EQ(CallEcho(CreatePstrainChannel(address, prefix)).code(),
            absl::StatusCode::kUnauthenticated);
  // Without "Bearer ", and twice (right, then wrong): refused.
  EXPECT_EQ(CallEcho(CreatePstrainChannel(address), "right-token").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(
      CallEcho(CreatePstrainChannel(address, right), "Bearer wrong").code(),
      absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(service.calls_served(), 1);

  // gRPC's health service answers without a token (Kubernetes probes).
  auto channel = CreatePstrainChannel(address);
  const grpc::internal::RpcMethod check("/grpc.health.v1.Health/Check",
                                        grpc::internal::RpcMethod::NORMAL_RPC,
                                        channel);
  grpc::ClientContext context;
  grpc::ByteBuffer request, response;
  grpc::Slice empty(std::string(""));
  request = grpc::ByteBuffer(&empty, 1);
  const grpc::Status health =
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), check, &context, request, &response);
  EXPECT_TRUE(health.ok()) << health.error_message();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace pstrain
