#include "compute/gpu/shape_check.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

}  // namespace

absl::Status CheckDims(absl::string_view op,
                       absl::Span<const cpu::NamedSize> dims) {
  for (const auto& [name, value] : dims) {
    if (value <= 0 || value > kIntMax) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", name, " must be in [1, ", kIntMax, "], got ", value));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckElements(absl::string_view op, absl::string_view what,
                           std::initializer_list<int64_t> dims) {
  int64_t product = 1;
  for (int64_t d : dims) {
    // Every factor is positive (CheckDims ran first), so the division test
    // detects overflow of the running product.
    if (d <= 0 || product > kIntMax / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", what, " has more than ", kIntMax, " elements"));
    }
    product *= d;
  }
  return absl::OkStatus();
}

absl::Status CheckDevice(absl::string_view op, const void* device) {
  if (device == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": device is required"));
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
