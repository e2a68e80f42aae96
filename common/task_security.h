// The security a task of each role starts with: the files its --tls_cert,
// --tls_key, --tls_ca, --auth_token_file and --chief_token_file flags name,
// read (common/grpc_security.h), and what the role needs on top of them.
//
//   GrpcSecurityFiles files;  // the flags' values, in main.cc
//   files.tls_cert = absl::GetFlag(FLAGS_tls_cert);
//   ...
//   absl::StatusOr<GrpcSecurity> security =
//       LoadTaskSecurity(files, config->task.job());
//   if (!security.ok()) return FailUsage(security.status().message());
//
// The chief and the ps tasks need a way to tell the chief's calls from a
// worker's: with a cluster token and no mutual TLS, that is the chief's own
// token, so both refuse to start without it, each saying why for its role.
#ifndef PSTRAIN_COMMON_TASK_SECURITY_H_
#define PSTRAIN_COMMON_TASK_SECURITY_H_

#include "absl/status/statusor.h"
#include "common/grpc_security.h"
#include "proto/rpc.pb.h"

namespace pstrain {

// LoadGrpcSecurity(files), then, for `role`:
// - JOB_CHIEF and JOB_PS: INVALID_ARGUMENT starting "--chief_token_file: "
//   when there is an auth token but neither a chief token nor mutual TLS;
// - JOB_CHIEF: is_chief set, so its calls carry the chief's token;
// - JOB_WORKER and JOB_EVALUATOR: the files' security as it is (their calls
//   carry the cluster's token).
absl::StatusOr<GrpcSecurity> LoadTaskSecurity(const GrpcSecurityFiles& files,
                                              JobType role);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TASK_SECURITY_H_
