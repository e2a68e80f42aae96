#include "compute/cpu/zero_padding2d.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<std::unique_ptr<ZeroPadding2DOp>> ZeroPadding2DOp::Create(
    const ZeroPadding2DShape& shape) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"batch", shape.batch},
      {"height", shape.height},
      {"width", shape.width},
      {"channels", shape.channels}};
  for (const auto& [name, value] : sizes) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ZeroPadding2D: ", name, " must be positive, got ", value));
    }
  }
  const std::pair<const char*, int64_t> pads[] = {{"top", shape.top},
                                                  {"bottom", shape.bottom},
                                                  {"left", shape.left},
                                                  {"right", shape.right}};
  for (const auto& [name, value] : pads) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ZeroPadding2D: ", name,
                       " padding must be non-negative, got ", value));
    }
  }
  return std::unique_ptr<ZeroPadding2DOp>(new ZeroPadding2DOp(shape));
}

absl::Status ZeroPadding2DOp::Forward(const float* x, float* y) const {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(
        "ZeroPadding2D forward: x and y are required");
  }
  const ZeroPadding2DShape& s = shape_;
  const int64_t row = s.width * s.channels;          // An input row.
  const int64_t out_row = out_width() * s.channels;  // An output row.
  const int64_t before = s.left * s.channels, after = s.right * s.channels;
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* xn = x + n * s.height * row;
    float* yn = y + n * out_height() * out_row;
    std::fill(yn, yn + s.top * out_row, 0.0f);
    float* out = yn + s.top * out_row;
    for (int64_t h = 0; h < s.height; ++h, out += out_row) {
      std::fill(out, out + before, 0.0f);
      std::copy(xn + h * row, xn + (h + 1) * row, out + before);
      std::fill(out + before + row, out + before + row + after, 0.0f);
    }
    std::fill(out, out + s.bottom * out_row, 0.0f);
  }
  return absl::OkStatus();
}

absl::Status ZeroPadding2DOp::Backward(const float* dy, float* dx) const {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        "ZeroPadding2D backward: dy and dx are required");
  }
  const ZeroPadding2DShape& s = shape_;
  const int64_t row = s.width * s.channels;
  const int64_t out_row = out_width() * s.channels;
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* in =
        dy + (n * out_height() + s.top) * out_row + s.left * s.channels;
    float* dxn = dx + n * s.height * row;
    for (int64_t h = 0; h < s.height; ++h, in += out_row) {
      std::copy(in, in + row, dxn + h * row);
    }
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
