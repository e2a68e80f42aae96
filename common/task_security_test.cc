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
      "key.pem", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
  files.tls_ca = TestFile("ca.pem", cert);
  return files;
}

TEST(LoadTaskSecurity, PsNeedsTheChiefsTokenBesideTheClusterToken) {
  absl::StatusOr<GrpcSecurity> security =
      LoadTaskSecurity(WithTokens(/*chief_token=*/false), JOB_PS);
  ASSERT_FALSE(security.ok());
  EXPECT_EQ(security.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(security.status().message(),
            "--chief_token_file: needed with --auth_token_file (without it or "
            "mutual TLS, any worker could call the chief's methods)");
}

TEST(LoadTaskSecurity, ChiefNeedsItsTokenBesideTheClusterToken) {
  absl::StatusOr<GrpcSecurity> security =
      LoadTaskSecurity(WithTokens(/*chief_token=*/false), JOB_CHIEF);
  ASSERT_FALSE(security.ok());
  EXPECT_EQ(security.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(security.status().message(),
            "--chief_token_file: needed with --auth_token_file (the ps tasks "
            "accept the chief's calls only with it)");
}

TEST(LoadTaskSecurity, WorkerAndEvaluatorNeedOnlyTheClusterToken) {
  for (JobType role : {JOB_WORKER, JOB_EVALUATOR}) {
    absl::StatusOr<GrpcSecurity> security =
        LoadTaskSecurity(WithTokens(/*chief_token=*/false), role);
    ASSERT_TRUE(security.ok()) << JobType_Name(role) << ": "
                               << security.status();
    EXPECT_EQ(security->auth_token, "cluster-token");
    EXPECT_FALSE(security->is_chief) << JobType_Name(role);
  }
}

TEST(LoadTaskSecurity, OnlyTheChiefSendsTheChiefsToken) {
  for (JobType role : {JOB_CHIEF, JOB_PS, JOB_EVALUATOR}) {
    absl::StatusOr<GrpcSecurity> security =
        LoadTaskSecurity(WithTokens(/*chief_token=*/true), role);
    ASSERT_TRUE(security.ok()) << JobType_Name(role) << ": "
                               << security.status();
    EXPECT_EQ(security->auth_token, "cluster-token");
    EXPECT_EQ(security->chief_token, "chief-token");
    EXPECT_EQ(security->is_chief, role == JOB_CHIEF) << JobType_Name(role);
  }
}

TEST(LoadTaskSecurity, MutualTlsTellsTheChiefApartWithoutItsToken) {
  for (JobType role : {JOB_CHIEF, JOB_PS}) {
    absl::StatusOr<GrpcSecurity> security =
        LoadTaskSecurity(WithTlsAndToken(), role);
    ASSERT_TRUE(security.ok()) << JobType_Name(role) << ": "
                               << security.status();
    EXPECT_TRUE(security->tls());
    EXPECT_EQ(security->chief_token, "");
  }
}

TEST(LoadTaskSecurity, NoSecurityIsAllowedForEveryRole) {
  for (JobType role : {JOB_CHIEF, JOB_PS, JOB_WORKER, JOB_EVALUATOR}) {
    absl::StatusOr<GrpcSecurity> security = LoadTaskSecurity({}, role);
    ASSERT_TRUE(security.ok()) << JobType_Name(role) << ": "
                               << security.status();
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
  absl::StatusOr<GrpcSecurity> security = LoadTaskSecurity(files, JOB_PS);
  ASSERT_FALSE(security.ok());
  EXPECT_EQ(security.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(security.status().message(),
            "--tls_key: missing (mutual TLS needs --tls_cert, --tls_key and "
            "--tls_ca together)");

  files = {};
  files.auth_token_file = "/nonexistent/token";
  security = LoadTaskSecurity(files, JOB_CHIEF);
  ASSERT_FALSE(security.ok());
  EXPECT_EQ(security.status().message(),
            "--auth_token_file: cannot read /nonexistent/token: No such file "
            "or directory");
}

}  // namespace
}  // namespace pstrain
