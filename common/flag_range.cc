#include "common/flag_range.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status FlagAtLeast(absl::string_view flag, int64_t value, int64_t min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": ", value, " must be >= ", min));
}

absl::Status FlagInRange(absl::string_view flag, int64_t value, int64_t min,
                         int64_t max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": ", value, " must be in [", min, ", ", max, "]"));
}

}  // namespace pstrain
