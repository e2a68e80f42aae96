#include "compute/cpu/window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<Window> KerasWindow(int64_t input, int64_t kernel,
                                   int64_t stride, Padding padding) {
  if (input <= 0 || kernel <= 0 || stride <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("window sizes must be positive: input ", input,
                     ", kernel ", kernel, ", stride ", stride));
  }
  Window window;
  if (padding == Padding::kValid) {
    if (kernel > input) {
      return absl::InvalidArgumentError(absl::StrCat(
          "valid padding: kernel ", kernel, " is larger than input ", input));
    }
    window.output = (input - kernel) / stride + 1;
    return window;
  }
  window.output = (input + stride - 1) / stride;
  if (padding == Padding::kCausal) {
    window.pad_before = kernel - 1;
    return window;
  }
  int64_t total =
      std::max<int64_t>((window.output - 1) * stride + kernel - input, 0);
  window.pad_before = total / 2;
  window.pad_after = total - window.pad_before;
  return window;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
