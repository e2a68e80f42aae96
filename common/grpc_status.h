// Conversion between absl::Status and grpc::Status, in one place.
//
// Core logic (ps/, worker/, chief/) returns absl::Status; only the thin gRPC
// service adapters and clients convert, with these two functions. Both status
// types use the canonical error codes, so the code and message survive a round
// trip unchanged; an absl status's payloads (SetPayload: what kind of error it
// is, e.g. ps/staleness.h) travel in the gRPC status's error_details as a
// StatusPayloads message (proto/rpc.proto).
#ifndef PSTRAIN_COMMON_GRPC_STATUS_H_
#define PSTRAIN_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace pstrain {

// The gRPC status for `status`: same code, same message, its payloads.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The absl status for `status`: same code, same message, the payloads its
// error_details carry (ignored when they are not a StatusPayloads). A code
// outside the canonical range becomes UNKNOWN, with the number in the
// message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_GRPC_STATUS_H_
