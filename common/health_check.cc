#include "common/health_check.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/health.pb.h"

namespace pstrain {

absl::StatusOr<std::string> AnswerHealthCheck(absl::string_view request,
                                              absl::string_view service,
                                              bool serving) {
  HealthCheckRequest parsed;
  if (!parsed.ParseFromArray(request.data(), request.size())) {
    return absl::InvalidArgumentError("HealthCheckRequest does not parse");
  }
  if (!parsed.service().empty() && parsed.service() != service) {
    return absl::NotFoundError(
        absl::StrCat("no service \"", parsed.service(), "\" here",
                     service.empty() ? "" : absl::StrCat("; this server has ",
                                                         service)));
  }
  HealthCheckResponse response;
  response.set_status(serving ? HealthCheckResponse::SERVING
                              : HealthCheckResponse::NOT_SERVING);
  return response.SerializeAsString();
}

}  // namespace pstrain
