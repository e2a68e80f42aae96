#include "compute/precision.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {

absl::string_view PrecisionName(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name.empty() || name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\" must be fp32 or bf16"));
}

}  // namespace worker
}  // namespace pstrain
