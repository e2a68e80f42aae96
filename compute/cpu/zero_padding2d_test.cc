#include "compute/cpu/zero_padding2d.h"

#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

ZeroPadding2DShape Shape(int64_t top, int64_t bottom, int64_t left,
                         int64_t right) {
  ZeroPadding2DShape s;
  s.batch = 2;
  s.height = 3;
  s.width = 4;
  s.channels = 2;
  s.top = top;
  s.bottom = bottom;
  s.left = left;
  s.right = right;
  return s;
}

std::vector<ZeroPadding2DShape> Shapes() {
  return {Shape(1, 1, 1, 1), Shape(0, 2, 3, 0), Shape(2, 0, 0, 1),
          Shape(0, 0, 0, 0)};
}

// y[n, oh, ow, c] by its definition: x where (oh - top, ow - left) falls
// inside the input, else 0.
std::vector<float> RefForward(const ZeroPadding2DShape& s,
                              const std::vector<float>& x) {
  const int64_t oh_size = s.top + s.height + s.bottom;
  const int64_t ow_size = s.left + s.width + s.right;
  std::vector<float> y;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < oh_size; ++oh)
      for (int64_t ow = 0; ow < ow_size; ++ow)
        for (int64_t c = 0; c < s.channels; ++c) {
          const int64_t h = oh - s.top, w = ow - s.left;
          const bool inside = h >= 0 && h < s.height && w >= 0 && w < s.width;
          y.push_back(
              inside ? x[((n * s.height + h) * s.width + w) * s.channels + c]
                     : 0.0f);
        }
  return y;
}

TEST(ZeroPadding2DOp, ForwardMatchesReference) {
  for (const ZeroPadding2DShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message() << "pad " << s.top << " " << s.bottom << " "
                                    << s.left << " " << s.right);
    absl::StatusOr<std::unique_ptr<ZeroPadding2DOp>> pad =
        ZeroPadding2DOp::Create(s);
    ASSERT_TRUE(pad.ok()) << pad.status();
    std::vector<float> x =
        RandomFloats(s.batch * s.height * s.width * s.channels, 1);
    std::vector<float> expected = RefForward(s, x);
    ASSERT_EQ(
        static_cast<int64_t>(expected.size()),
        s.batch * (*pad)->out_height() * (*pad)->out_width() * s.channels);
    // Garbage in y first: Forward must overwrite every element.
    std::vector<float> y(expected.size(), 7.0f);
    ASSERT_EQ((*pad)->Forward(x.data(), y.data()), absl::OkStatus());
    EXPECT_EQ(y, expected);
  }
}

TEST(ZeroPadding2DOp, BackwardIsTheAdjointOfForward) {
  // For a linear map, <Forward(x), dy> == <x, Backward(dy)> for all x, dy;
  // with random x and dy this checks every element of the crop.
  for (const ZeroPadding2DShape& s : Shapes()) {
    absl::StatusOr<std::unique_ptr<ZeroPadding2DOp>> pad =
        ZeroPadding2DOp::Create(s);
    ASSERT_TRUE(pad.ok()) << pad.status();
    const int64_t in = s.batch * s.height * s.width * s.channels;
    const int64_t out =
        s.batch * (*pad)->out_height() * (*pad)->out_width() * s.channels;
    std::vector<float> x = RandomFloats(in, 2), dy = RandomFloats(out, 3);
    std::vector<float> y(out), dx(in, 7.0f);
    ASSERT_EQ((*pad)->Forward(x.data(), y.data()), absl::OkStatus());
    ASSERT_EQ((*pad)->Backward(dy.data(), dx.data()), absl::OkStatus());
    EXPECT_NEAR(Dot(y, dy), Dot(x, dx), 1e-9);
    // And directly: dx is dy cropped, i.e. Forward(dx) == dy off the border.
    std::vector<float> padded_dx(out);
    ASSERT_EQ((*pad)->Forward(dx.data(), padded_dx.data()), absl::OkStatus());
    std::vector<float> ones(in, 1.0f), mask(out);
    ASSERT_EQ((*pad)->Forward(ones.data(), mask.data()), absl::OkStatus());
    for (int64_t i = 0; i < out; ++i) {
      EXPECT_EQ(padded_dx[i], mask[i] * dy[i]) << "output " << i;
    }
  }
}

TEST(ZeroPadding2DOp, CreateRefusesBadShapes) {
  ZeroPadding2DShape s = Shape(1, 1, 1, 1);
  s.width = 0;
  absl::Status status = ZeroPadding2DOp::Create(s).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "ZeroPadding2D: width must be positive, got 0");
  s = Shape(1, 1, -2, 1);
  status = ZeroPadding2DOp::Create(s).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "ZeroPadding2D: left padding must be non-negative, got -2");
}

TEST(ZeroPadding2DOp, RefusesNullBuffers) {
  absl::StatusOr<std::unique_ptr<ZeroPadding2DOp>> pad =
      ZeroPadding2DOp::Create(Shape(1, 1, 1, 1));
  ASSERT_TRUE(pad.ok()) << pad.status();
  std::vector<float> buffer(1000);
  EXPECT_EQ((*pad)->Forward(nullptr, buffer.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*pad)->Backward(buffer.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
