#include "common/task_security.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// A file under the test's temporary directory holding `content`.
std::string TestFile(const std::string& name, const std::string& content) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") +
                           "/task_security_test_" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

GrpcSecurityFiles WithTokens(bool chief_token) {
  GrpcSecurityFiles files;
  files.auth_token_file = TestFile("cluster-token", "cluster-token\n");
  if (chief_token) {
    files.chief_token_file = TestFile("chief-token", "chief-token\n");
  }
  return files;
}

GrpcSecurityFiles WithTlsAndToken() {
  GrpcSecurityFiles files = WithTokens(/*chief_token=*/false);
  const std::string cert =
      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  files.tls_cert = TestFile("cert.pem", cert);
  files.tls_key = TestFile(
      "key.pem",
      "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
  files.tls_ca = TestFile("ca.pem", cert);
  return files;
}

// Each role says why it needs the chief's token.
TEST(LoadTaskSecurity, ChiefAndPsNeedTheChiefsTokenBesideTheClusterToken) {
  const struct {
    JobType role;
    std::string message;
  } cases[] = {
      {JOB_PS,
       "--chief_token_file: needed with --auth_token_file (without it or "
       "mutual TLS, any worker could call the chief's methods)"},
      {JOB_CHIEF,
       "--chief_token_file: needed with --auth_token_file (the ps tasks "
       "accept the chief's calls only with it)"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<GrpcSecurity> security =
        LoadTaskSecurity(WithTokens(/*chief_token=*/false), c.role);
    EXPECT_EQ(security.status().code(), absl::StatusCode::kInvalidArgument)
        << JobType_Name(c.role);
    EXPECT_EQ(security.status().message(), c.message);
  }
}

TEST(LoadTaskSecurity, WorkerAndEvaluatorNeedOnlyTheClusterToken) {
  for (JobType role : {JOB_WORKER, JOB_EVALUATOR}) {
    absl::StatusOr<GrpcSecurity> security =
        LoadTaskSecurity(WithTokens(/*chief_token=*/false), role);
    ASSERT_TRUE(security.ok())
        << JobType_Name(role) << ": " << security.status();
    EXPECT_EQ(security->auth_token, "cluster-token");
    EXPECT_FALSE(security->is_chief) << JobType_Name(role);
  }
}

TEST(LoadTaskSecurity, OnlyTheChiefSendsTheChiefsToken) {
  for (JobType role : {JOB_CHIEF, JOB_PS, JOB_EVALUATOR}) {
    absl::StatusOr<GrpcSecurity> security =
        LoadTaskSecurity(WithTokens(/*chief_token=*/true), role);
    ASSERT_TRUE(security.ok())
        << JobType_Name(role) << ": " << security.status();
    EXPECT_EQ(security->auth_token, "cluster-token");
    EXPECT_EQ(security->chief_token, "chief-token");
    EXPECT_EQ(security->is_chief, role == JOB_CHIEF) << JobType_Name(role);
  }
}

TEST(LoadTaskSecurity, MutualTlsTellsTheChiefApartWithoutItsToken) {
  for (JobType role : {JOB_CHIEF, JOB_PS}) {
    absl::StatusOr<GrpcSecurity> security =
        LoadTaskSecurity(WithTlsAndToken(), role);
    ASSERT_TRUE(security.ok())
        << JobType_Name(role) << ": " << security.status();
    EXPECT_TRUE(security->tls());
    EXPECT_EQ(security->chief_token, "");
  }
}

TEST(LoadTaskSecurity, NoSecurityIsAllowedForEveryRole) {
  for (JobType role : {JOB_CHIEF, JOB_PS, JOB_WORKER, JOB_EVALUATOR}) {
    absl::StatusOr<GrpcSecurity> security = LoadTaskSecurity({}, role);
    ASSERT_TRUE(security.ok())
        << JobType_Name(role) << ": " << security.status();
    EXPECT_FALSE(security->tls());
    EXPECT_EQ(security->auth_token, "");
    EXPECT_EQ(security->is_chief, role == JOB_CHIEF) << JobType_Name(role);
  }
}

TEST(LoadTaskSecurity, FileErrorsComeFirstAndNameTheFlag) {
  GrpcSecurityFiles files;
  files.tls_cert = TestFile("lone-cert.pem",
                            "-----BEGIN CERTIFICATE-----\nMIIB\n"
                            "-----END CERTIFICATE-----\n");
  files.auth_token_file = TestFile("token", "cluster-token\n");
  // The missing TLS key is named, not the token's want of a chief token.
  EXPECT_EQ(LoadTaskSecurity(files, JOB_PS).status(),
            absl::InvalidArgumentError(
                "--tls_key: missing (mutual TLS needs --tls_cert, --tls_key "
                "and --tls_ca together)"));
  files = {};
  files.auth_token_file = "/nonexistent/token";
  EXPECT_EQ(LoadTaskSecurity(files, JOB_CHIEF).status(),
            absl::InvalidArgumentError("--auth_token_file: cannot read "
                                       "/nonexistent/token: No such file or "
                                       "directory"));
}

}  // namespace
}  // namespace pstrain
