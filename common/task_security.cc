#include "common/task_security.h"

#include <utility>

#include "absl/status/status.h"

namespace pstrain {

absl::StatusOr<GrpcSecurity> LoadTaskSecurity(const GrpcSecurityFiles& files,
                                              JobType role) {
  absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(files);
  if (!security.ok() || (role != JOB_CHIEF && role != JOB_PS)) {
    return security;
  }
  if (!security->auth_token.empty() && security->chief_token.empty() &&
      !security->tls()) {
    return absl::InvalidArgumentError(
        role == JOB_PS
            ? "--chief_token_file: needed with --auth_token_file (without it "
              "or mutual TLS, any worker could call the chief's methods)"
            : "--chief_token_file: needed with --auth_token_file (the ps "
              "tasks accept the chief's calls only with it)");
  }
  security->is_chief = role == JOB_CHIEF;
  return security;
}

}  // namespace pstrain
