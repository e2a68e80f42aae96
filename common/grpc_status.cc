#include "common/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// Both enums number the canonical codes 0 (OK) to 16 (UNAUTHENTICATED).
constexpr int kLastCanonicalCode = 16;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  if (code < 0 || code > kLastCanonicalCode) {
    return absl::UnknownError(absl::StrCat("gRPC status code ", code, ": ",
                                           status.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      status.error_message());
}

}  // namespace pstrain
