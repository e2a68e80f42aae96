// Keras's output size and padding of one spatial dimension of a convolution
// or pooling window, and Flatten.
//
//   absl::StatusOr<Window> w = KerasWindow(/*input=*/28, /*kernel=*/3,
//                                          /*stride=*/2, Padding::kSame);
//   // w->output == 14, w->pad_before == 0, w->pad_after == 1
//
// Keras "valid": output = floor((input - kernel) / stride) + 1, no padding.
// Keras "same": output = ceil(input / stride); the total padding is
// max((output - 1) * stride + kernel - input, 0), of which the top/left side
// gets total / 2 and the bottom/right side the rest (TensorFlow's rule, so an
// odd total pads one more row at the bottom).
// Keras "causal" (Conv1D): output = ceil(input / stride), all kernel - 1
// padding before (left), none after: output t sees inputs up to t * stride.
// For a dilated convolution, `kernel` is the dilated extent
// (kernel - 1) * dilation + 1 (DilatedExtent).
//
// Flatten needs no op: an NHWC activation [N, H, W, C] is, byte for byte, the
// row-major [N, H * W * C] matrix that Keras's Flatten (channels_last)
// produces, so a Dense layer after Flatten reads the same buffer, and the
// gradient it writes is already the NHWC gradient. FlattenedSize gives the
// row length.
#ifndef PSTRAIN_COMPUTE_CPU_WINDOW_H_
#define PSTRAIN_COMPUTE_CPU_WINDOW_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace pstrain {
namespace worker {
namespace cpu {

enum class Padding { kValid, kSame, kCausal };

struct Window {
  int64_t output = 0;
  int64_t pad_before = 0;  // Top or left.
  int64_t pad_after = 0;   // Bottom or right.
};

// The window for `input` elements, a `kernel`-wide window and `stride`;
// INVALID_ARGUMENT if a size is not positive or, for kValid, kernel > input.
absl::StatusOr<Window> KerasWindow(int64_t input, int64_t kernel,
                                   int64_t stride, Padding padding);

// The extent of a kernel of `kernel` taps `dilation` apart: Keras's
// effective kernel size, (kernel - 1) * dilation + 1.
inline int64_t DilatedExtent(int64_t kernel, int64_t dilation) {
  return (kernel - 1) * dilation + 1;
}

// Row length of a flattened NHWC activation: height * width * channels.
inline int64_t FlattenedSize(int64_t height, int64_t width, int64_t channels) {
  return height * width * channels;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_WINDOW_H_
