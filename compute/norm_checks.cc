#include "compute/norm_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

absl::Status CheckNormEpsilon(absl::string_view op, float epsilon) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": epsilon must be finite and non-negative, got ", epsilon));
  }
  return absl::OkStatus();
}

absl::Status CheckNormParams(absl::string_view what, const float* gamma,
                             const float* beta, bool scale, bool center) {
  if ((gamma != nullptr) != scale || (beta != nullptr) != center) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": gamma must be given iff scale, beta iff center"));
  }
  return absl::OkStatus();
}

absl::Status CheckNormBackward(absl::string_view op, const float* x,
                               const float* gamma, const float* dy,
                               const float* dgamma, const float* dbeta,
                               bool scale, bool center) {
  if (x == nullptr || dy == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " backward: x and dy are required"));
  }
  if ((gamma != nullptr) != scale || (dgamma != nullptr) != scale ||
      (dbeta != nullptr) != center) {
    return absl::InvalidArgumentError(
        absl::StrCat(op,
                     " backward: gamma and dgamma must be given iff scale, "
                     "dbeta iff center"));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain
