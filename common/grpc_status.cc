#include "common/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "proto/rpc.pb.h"

namespace pstrain {
namespace {

// Both enums number the canonical codes 0 (OK) to 16 (UNAUTHENTICATED).
constexpr int kLastCanonicalCode = 16;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  StatusPayloads payloads;
  status.ForEachPayload(
      [&payloads](absl::string_view type_url, const absl::Cord& value) {
        StatusPayloads::Payload* payload = payloads.add_payloads();
        payload->set_type_url(std::string(type_url));
        payload->set_value(std::string(value));
      });
  return grpc::Status(
      static_cast<grpc::StatusCode>(status.code()),
      std::string(status.message()),
      payloads.payloads().empty() ? "" : payloads.SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  if (code < 0 || code > kLastCanonicalCode) {
    return absl::UnknownError(absl::StrCat("gRPC status code ", code, ": ",
                                           status.error_message()));
  }
  absl::Status result(static_cast<absl::StatusCode>(code),
                      status.error_message());
  StatusPayloads payloads;
  if (!status.error_details().empty() &&
      payloads.ParseFromString(status.error_details())) {
    for (const StatusPayloads::Payload& payload : payloads.payloads()) {
      result.SetPayload(payload.type_url(), absl::Cord(payload.value()));
    }
  }
  return result;
}

}  // namespace pstrain
