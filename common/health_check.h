// gRPC's standard health check (grpc.health.v1.Health/Check), answered by
// pstrain's own servers rather than gRPC's health service, which is a
// callback service: its threads would poll the process's sockets
// (ps/ps_service.h says why that costs).
#ifndef PSTRAIN_COMMON_HEALTH_CHECK_H_
#define PSTRAIN_COMMON_HEALTH_CHECK_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// The method's full name, as a generic service sees it.
inline constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

// The serialized HealthCheckResponse to the serialized HealthCheckRequest
// `request`, from a server whose one service is `service` (the empty name
// means the server as a whole): SERVING or NOT_SERVING as `serving` says.
// NOT_FOUND for another service; INVALID_ARGUMENT if `request` does not
// parse.
absl::StatusOr<std::string> AnswerHealthCheck(absl::string_view request,
                                              absl::string_view service,
                                              bool serving);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_HEALTH_CHECK_H_
