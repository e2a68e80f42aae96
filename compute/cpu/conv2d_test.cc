#include "compute/cpu/conv2d.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Tolerances. Forward against the double reference: float32 accumulation of
// at most a few hundred products of values in [-1, 1].
constexpr double kForwardTolerance = 1e-4;
// Gradient checks: central differences with eps 1e-3 on a float32 forward;
// max |analytic - numeric| <= 1e-2 * the gradient's largest component.
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

std::unique_ptr<Engine> MakeEngine(int threads = 0) {
  EngineOptions options;
  options.num_threads = threads;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Output size and top/left padding, by Keras's rule, written out here
// independently of window.h.
struct Dim {
  int64_t out, pad;
};
// k: the kernel's extent, (taps - 1) * dilation + 1.
Dim RefDim(int64_t in, int64_t k, int64_t s, Padding padding) {
  if (padding == Padding::kValid) return {(in - k) / s + 1, 0};
  const int64_t out = (in + s - 1) / s;
  if (padding == Padding::kCausal) return {out, k - 1};
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return {out, total / 2};
}

int64_t Size(const Conv2DShape& s) {
  return s.batch * s.height * s.width * s.in_channels;
}
int64_t KernelSize(const Conv2DShape& s) {
  return s.kernel_h * s.kernel_w * (s.in_channels / s.groups) * s.out_channels;
}
Dim RefH(const Conv2DShape& s) {
  return RefDim(s.height, (s.kernel_h - 1) * s.dilation_h + 1, s.stride_h,
                s.padding);
}
Dim RefW(const Conv2DShape& s) {
  return RefDim(s.width, (s.kernel_w - 1) * s.dilation_w + 1, s.stride_w,
                s.padding);
}
int64_t OutSize(const Conv2DShape& s) {
  return s.batch * RefH(s).out * RefW(s).out * s.out_channels;
}

// Calls f(n, oh, ow, ih, iw, kh, kw) for every output position and kernel
// tap (dilation apart) that lands inside the (unpadded) input.
template <typename F>
void ForEachTap(const Conv2DShape& s, F f) {
  Dim dh = RefH(s);
  Dim dw = RefW(s);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < dh.out; ++oh)
      for (int64_t ow = 0; ow < dw.out; ++ow)
        for (int64_t kh = 0; kh < s.kernel_h; ++kh)
          for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
            const int64_t ih = oh * s.stride_h + kh * s.dilation_h - dh.pad;
            const int64_t iw = ow * s.stride_w + kw * s.dilation_w - dw.pad;
            if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
            f(n, oh, ow, ih, iw, kh, kw);
          }
}

// With groups: output channel o reads the input channels of its group,
// kernel [kh, kw, ci / groups, co].
int64_t GroupOf(const Conv2DShape& s, int64_t o) {
  return o / (s.out_channels / s.groups);
}

// Naive NHWC x HWIO convolution in double.
std::vector<double> RefForward(const Conv2DShape& s,
                               const std::vector<float>& x,
                               const std::vector<float>& w,
                               const std::vector<float>& b) {
  Dim dh = RefH(s);
  Dim dw = RefW(s);
  const int64_t ci = s.in_channels, co = s.out_channels;
  const int64_t cg = ci / s.groups;
  std::vector<double> y(OutSize(s), 0.0);
  for (int64_t i = 0; i < OutSize(s); ++i) y[i] = s.use_bias ? b[i % co] : 0;
  ForEachTap(s, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw,
                    int64_t kh, int64_t kw) {
    for (int64_t o = 0; o < co; ++o)
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t in_c = GroupOf(s, o) * cg + c;
        y[((n * dh.out + oh) * dw.out + ow) * co + o] +=
            static_cast<double>(
                x[((n * s.height + ih) * s.width + iw) * ci + in_c]) *
            w[((kh * s.kernel_w + kw) * cg + c) * co + o];
      }
  });
  return y;
}

// Naive gradients in double: dx, dw, db of L = <y, dy>.
void RefBackward(const Conv2DShape& s, const std::vector<float>& x,
                 const std::vector<float>& w, const std::vector<float>& dy,
                 std::vector<double>* dx, std::vector<double>* dw,
                 std::vector<double>* db) {
  Dim dh = RefH(s);
  Dim dwd = RefW(s);
  const int64_t ci = s.in_channels, co = s.out_channels;
  const int64_t cg = ci / s.groups;
  dx->assign(Size(s), 0.0);
  dw->assign(KernelSize(s), 0.0);
  db->assign(co, 0.0);
  for (int64_t i = 0; i < OutSize(s); ++i) (*db)[i % co] += dy[i];
  ForEachTap(s, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw,
                    int64_t kh, int64_t kw) {
    for (int64_t o = 0; o < co; ++o)
      for (int64_t c = 0; c < cg; ++c) {
        const double g = dy[((n * dh.out + oh) * dwd.out + ow) * co + o];
        const int64_t xi =
            ((n * s.height + ih) * s.width + iw) * ci + GroupOf(s, o) * cg + c;
        const int64_t wi = ((kh * s.kernel_w + kw) * cg + c) * co + o;
        (*dx)[xi] += g * w[wi];
        (*dw)[wi] += g * x[xi];
      }
  });
}

void ExpectNear(const std::vector<float>& actual,
                const std::vector<double>& expected, double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

Conv2DShape Small(Padding padding, int64_t stride) {
  Conv2DShape s;
  s.batch = 2;
  s.height = 5;
  s.width = 5;
  s.in_channels = 3;
  s.out_channels = 4;
  s.kernel_h = 3;
  s.kernel_w = 3;
  s.stride_h = s.stride_w = stride;
  s.padding = padding;
  return s;
}

// Small shapes for the gradient checks and reference comparisons: valid and
// same, strides 1 and 2, a non-square kernel with unequal strides and an
// asymmetric same padding, and no bias.
std::vector<Conv2DShape> SmallShapes() {
  std::vector<Conv2DShape> shapes = {
      Small(Padding::kValid, 1), Small(Padding::kSame, 1),
      Small(Padding::kSame, 2), Small(Padding::kValid, 2)};
  Conv2DShape odd = Small(Padding::kSame, 1);
  odd.height = 6;
  odd.kernel_h = 2;
  odd.kernel_w = 3;
  odd.stride_h = 2;
  odd.stride_w = 1;
  shapes.push_back(odd);
  Conv2DShape no_bias = Small(Padding::kSame, 2);
  no_bias.use_bias = false;
  shapes.push_back(no_bias);
  return shapes;
}

std::string Describe(const Conv2DShape& s) {
  return testing::PrintToString(std::vector<int64_t>{
             s.height, s.width, s.in_channels, s.out_channels, s.kernel_h,
             s.kernel_w, s.stride_h, s.stride_w}) +
         (s.padding == Padding::kSame ? " same" : " valid") +
         (s.use_bias ? "" : " no-bias");
}

struct Buffers {
  std::vector<float> x, w, b, y, dy, dx, dw, db;
  explicit Buffers(const Conv2DShape& s, uint32_t seed = 1)
      : x(RandomFloats(Size(s), seed)),
        w(RandomFloats(KernelSize(s), seed + 1)),
        b(RandomFloats(s.out_channels, seed + 2)),
        y(OutSize(s)),
        dy(RandomFloats(OutSize(s), seed + 3)),
        dx(Size(s)),
        dw(KernelSize(s)),
        db(s.out_channels) {}
  const float* bias(const Conv2DShape& s) const {
    return s.use_bias ? b.data() : nullptr;
  }
  float* dbias(const Conv2DShape& s) {
    return s.use_bias ? db.data() : nullptr;
  }
};

TEST(Conv2DOp, ForwardMatchesNaiveReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const Conv2DShape& s : SmallShapes()) {
    SCOPED_TRACE(Describe(s));
    absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
        Conv2DOp::Create(s, engine.get());
    ASSERT_TRUE(conv.ok()) << conv.status();
    Buffers buf(s);
    ASSERT_TRUE(
        (*conv)
            ->Forward(buf.x.data(), buf.w.data(), 0, buf.bias(s), buf.y.data())
            .ok());
    ExpectNear(buf.y, RefForward(s, buf.x, buf.w, buf.b), kForwardTolerance);
  }
}

TEST(Conv2DOp, FusedReluForwardIsTheReluOfTheReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (Conv2DShape s : SmallShapes()) {
    s.fuse_relu = true;
    SCOPED_TRACE(Describe(s));
    absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
        Conv2DOp::Create(s, engine.get());
    ASSERT_TRUE(conv.ok()) << conv.status();
    Buffers buf(s);
    ASSERT_TRUE(
        (*conv)
            ->Forward(buf.x.data(), buf.w.data(), 0, buf.bias(s), buf.y.data())
            .ok());
    std::vector<double> expected = RefForward(s, buf.x, buf.w, buf.b);
    int64_t negative = 0;
    for (double& v : expected) {
      negative += v < 0;
      v = std::max(v, 0.0);
    }
    EXPECT_GT(negative, 0);  // The ReLU had something to do.
    ExpectNear(buf.y, expected, kForwardTolerance);
  }
}

TEST(Conv2DOp, OutputSizeFollowsKerasPadding) {
  std::unique_ptr<Engine> engine = MakeEngine();
  absl::StatusOr<std::unique_ptr<Conv2DOp>> same =
      Conv2DOp::Create(Small(Padding::kSame, 2), engine.get());
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ((*same)->out_height(), 3);
  EXPECT_EQ((*same)->out_width(), 3);
  absl::StatusOr<std::unique_ptr<Conv2DOp>> valid =
      Conv2DOp::Create(Small(Padding::kValid, 1), engine.get());
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ((*valid)->out_height(), 3);
}

TEST(Conv2DOp, GradientsMatchFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const Conv2DShape& s : SmallShapes()) {
    SCOPED_TRACE(Describe(s));
    absl::StatusOr<std::unique_ptr<Conv2DOp>> created =
        Conv2DOp::Create(s, engine.get());
    ASSERT_TRUE(created.ok()) << created.status();
    Conv2DOp& conv = **created;
    Buffers buf(s, 7);
    ASSERT_TRUE(conv.Backward(buf.x.data(), buf.w.data(), 0, buf.dy.data(),
                              buf.dx.data(), buf.dw.data(), buf.dbias(s))
                    .ok());
    // L = <conv(x, w) + b, dy>, so dL/dy = dy. Every perturbation of w gets
    // a new weights step so the op reorders the changed kernel.
    uint64_t step = 1;
    auto loss = [&]() {
      EXPECT_TRUE(conv.Forward(buf.x.data(), buf.w.data(), step++, buf.bias(s),
                               buf.y.data())
                      .ok());
      return Dot(buf.y, buf.dy);
    };
    EXPECT_TRUE(GradientsClose(
        buf.dx, NumericGradient(loss, buf.x.data(), buf.x.size(), kEps),
        kGradientTolerance))
        << "dx";
    EXPECT_TRUE(GradientsClose(
        buf.dw, NumericGradient(loss, buf.w.data(), buf.w.size(), kEps),
        kGradientTolerance))
        << "dw";
    if (s.use_bias) {
      EXPECT_TRUE(GradientsClose(
          buf.db, NumericGradient(loss, buf.b.data(), buf.b.size(), kEps),
          kGradientTolerance))
          << "db";
    }
  }
}

// MNIST-sized layers, where oneDNN picks its blocked AVX-512 kernels (and
// kernel layouts), against the double reference, forward and backward.
TEST(Conv2DOp, TypicalLayersMatchNaiveReferenceForwardAndBackward) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape first;
  first.batch = 4;
  first.height = first.width = 28;
  first.in_channels = 1;
  first.out_channels = 32;
  first.kernel_h = first.kernel_w = 3;
  first.padding = Padding::kSame;
  Conv2DShape second = first;
  second.height = second.width = 14;
  second.in_channels = 32;
  second.out_channels = 64;
  second.padding = Padding::kValid;
  Conv2DShape strided = second;
  strided.stride_h = strided.stride_w = 2;
  strided.padding = Padding::kSame;
  for (const Conv2DShape& s : {first, second, strided}) {
    SCOPED_TRACE(Describe(s));
    absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
        Conv2DOp::Create(s, engine.get());
    ASSERT_TRUE(conv.ok()) << conv.status();
    Buffers buf(s, 11);
    ASSERT_TRUE(
        (*conv)
            ->Forward(buf.x.data(), buf.w.data(), 0, buf.bias(s), buf.y.data())
            .ok());
    ExpectNear(buf.y, RefForward(s, buf.x, buf.w, buf.b), 1e-3);
    ASSERT_TRUE((*conv)
                    ->Backward(buf.x.data(), buf.w.data(), 0, buf.dy.data(),
                               buf.dx.data(), buf.dw.data(), buf.dbias(s))
                    .ok());
    std::vector<double> dx, dw, db;
    RefBackward(s, buf.x, buf.w, buf.dy, &dx, &dw, &db);
    // dw sums up to N * OH * OW = 3136 products.
    ExpectNear(buf.dx, dx, 1e-3);
    ExpectNear(buf.dw, dw, 1e-2);
    ExpectNear(buf.db, db, 1e-2);
  }
}

// DepthwiseConv2D (groups = in, multiplier 1 and 3), a grouped
// convolution of 2 channels per group, dilation (with same padding, and
// valid), and Conv1D's causal padding (height 1, dilated and strided),
// forward and backward against the naive loops.
TEST(Conv2DOp, GroupedDilatedAndCausalMatchNaiveReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape base;
  base.batch = 3;
  base.height = 7;
  base.width = 6;
  base.in_channels = 4;
  base.out_channels = 4;
  base.kernel_h = base.kernel_w = 3;
  std::vector<std::pair<std::string, Conv2DShape>> cases;
  Conv2DShape s = base;
  s.groups = 4;
  s.padding = Padding::kSame;
  cases.push_back({"depthwise same", s});
  s.out_channels = 12;
  s.kernel_w = 2;
  s.stride_h = s.stride_w = 2;
  s.padding = Padding::kValid;
  cases.push_back({"depthwise x3 strided", s});
  s = base;
  s.groups = 2;
  s.out_channels = 6;
  s.dilation_h = 2;
  s.dilation_w = 3;
  s.padding = Padding::kSame;
  cases.push_back({"grouped dilated same", s});
  s = base;
  s.dilation_h = s.dilation_w = 2;
  cases.push_back({"dilated valid", s});
  s = base;
  s.height = 1;
  s.width = 9;
  s.kernel_h = 1;
  s.dilation_w = 2;
  s.padding = Padding::kCausal;
  cases.push_back({"causal dilated", s});
  s.dilation_w = 1;
  s.stride_w = 2;
  s.use_bias = false;
  cases.push_back({"causal strided, no bias", s});
  for (const auto& [name, shape] : cases) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
        Conv2DOp::Create(shape, engine.get());
    ASSERT_TRUE(conv.ok()) << conv.status();
    ASSERT_EQ((*conv)->out_height() * (*conv)->out_width() *
                  shape.out_channels * shape.batch,
              OutSize(shape));
    Buffers buf(shape, 13);
    ASSERT_TRUE((*conv)
                    ->Forward(buf.x.data(), buf.w.data(), 0, buf.bias(shape),
                              buf.y.data())
                    .ok());
    ExpectNear(buf.y, RefForward(shape, buf.x, buf.w, buf.b), 1e-4);
    ASSERT_TRUE((*conv)
                    ->Backward(buf.x.data(), buf.w.data(), 0, buf.dy.data(),
                               buf.dx.data(), buf.dw.data(), buf.dbias(shape))
                    .ok());
    std::vector<double> dx, dw, db;
    RefBackward(shape, buf.x, buf.w, buf.dy, &dx, &dw, &db);
    ExpectNear(buf.dx, dx, 1e-4);
    ExpectNear(buf.dw, dw, 1e-4);
    if (shape.use_bias) ExpectNear(buf.db, db, 1e-4);
  }
}

TEST(Conv2DOp, RefusesGroupsThatDoNotDivideTheChannels) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape s;
  s.batch = 1;
  s.height = s.width = 4;
  s.in_channels = 4;
  s.out_channels = 6;
  s.kernel_h = s.kernel_w = 3;
  s.groups = 4;
  absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
      Conv2DOp::Create(s, engine.get());
  ASSERT_FALSE(conv.ok());
  EXPECT_EQ(conv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(conv.status().message(),
            "Conv2D: groups 4 must divide in_channels 4 and out_channels 6");
}

TEST(Conv2DOp, ForwardTwiceGivesIdenticalResults) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape s = Small(Padding::kSame, 1);
  s.in_channels = 16;
  s.out_channels = 32;
  absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
      Conv2DOp::Create(s, engine.get());
  ASSERT_TRUE(conv.ok()) << conv.status();
  Buffers buf(s);
  std::vector<float> first(OutSize(s)), second(OutSize(s));
  ASSERT_TRUE(
      (*conv)
          ->Forward(buf.x.data(), buf.w.data(), 0, buf.b.data(), first.data())
          .ok());
  ASSERT_TRUE(
      (*conv)
          ->Forward(buf.x.data(), buf.w.data(), 0, buf.b.data(), second.data())
          .ok());
  EXPECT_EQ(first, second);
}

TEST(Conv2DOp, ReordersKernelOncePerWeightsStep) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape s = Small(Padding::kSame, 1);
  s.in_channels = 32;
  s.out_channels = 64;
  absl::StatusOr<std::unique_ptr<Conv2DOp>> created =
      Conv2DOp::Create(s, engine.get());
  ASSERT_TRUE(created.ok()) << created.status();
  Conv2DOp& conv = **created;
  Buffers buf(s);
  auto forward = [&](uint64_t step) {
    EXPECT_TRUE(conv.Forward(buf.x.data(), buf.w.data(), step, buf.b.data(),
                             buf.y.data())
                    .ok());
    return buf.y;
  };
  std::vector<float> before = forward(5);
  forward(5);
  const int64_t per_step = conv.reorders_weights() ? 1 : 0;
  EXPECT_EQ(conv.weight_reorder_count(), per_step);
  // New values under a new step are used, not the cached copy.
  for (float& v : buf.w) v *= 2.0f;
  std::vector<float> after = forward(6);
  EXPECT_EQ(conv.weight_reorder_count(), 2 * per_step);
  ExpectNear(after, RefForward(s, buf.x, buf.w, buf.b), kForwardTolerance);
  EXPECT_NE(before, after);
}

TEST(Conv2DOp, ResultsDoNotDependOnThreadCount) {
  Conv2DShape s = Small(Padding::kSame, 1);
  s.batch = 8;
  s.height = s.width = 12;
  s.in_channels = 16;
  s.out_channels = 32;
  Buffers one(s), two(s);
  for (auto [threads, buf] : {std::pair<int, Buffers*>{1, &one}, {2, &two}}) {
    std::unique_ptr<Engine> engine = MakeEngine(threads);
    absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
        Conv2DOp::Create(s, engine.get());
    ASSERT_TRUE(conv.ok()) << conv.status();
    ASSERT_TRUE((*conv)
                    ->Forward(buf->x.data(), buf->w.data(), 0, buf->b.data(),
                              buf->y.data())
                    .ok());
    ASSERT_TRUE((*conv)
                    ->Backward(buf->x.data(), buf->w.data(), 0, buf->dy.data(),
                               buf->dx.data(), buf->dw.data(), buf->db.data())
                    .ok());
  }
  for (size_t i = 0; i < one.y.size(); ++i)
    ASSERT_NEAR(one.y[i], two.y[i], 1e-5);
  for (size_t i = 0; i < one.dw.size(); ++i) {
    ASSERT_NEAR(one.dw[i], two.dw[i], 1e-4);
  }
}

TEST(Conv2DOp, FirstLayerSkipsInputGradient) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape s = Small(Padding::kSame, 1);
  Conv2DShape first = s;
  first.compute_dx = false;
  absl::StatusOr<std::unique_ptr<Conv2DOp>> full =
      Conv2DOp::Create(s, engine.get());
  absl::StatusOr<std::unique_ptr<Conv2DOp>> no_dx =
      Conv2DOp::Create(first, engine.get());
  ASSERT_TRUE(full.ok() && no_dx.ok());
  Buffers a(s), b(s);
  ASSERT_TRUE((*full)
                  ->Backward(a.x.data(), a.w.data(), 0, a.dy.data(),
                             a.dx.data(), a.dw.data(), a.db.data())
                  .ok());
  ASSERT_TRUE((*no_dx)
                  ->Backward(b.x.data(), nullptr, 0, b.dy.data(), nullptr,
                             b.dw.data(), b.db.data())
                  .ok());
  EXPECT_EQ(a.dw, b.dw);
  EXPECT_EQ(a.db, b.db);
  EXPECT_EQ((*no_dx)
                ->Backward(b.x.data(), b.w.data(), 0, b.dy.data(), b.dx.data(),
                           b.dw.data(), b.db.data())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// bf16 mixed precision against the float32 op on the same buffers:
// max |bf16 - fp32| <= 1e-2 * max |fp32| for y, dx, dw and db.
constexpr double kBf16Tolerance = 1e-2;

struct ConvRun {
  std::vector<float> y, dx, dw, db;
  int64_t conversions = 0;
  int64_t weight_reorders = 0;
};

ConvRun RunConv(Conv2DShape s, bool bf16, Engine* engine, const Buffers& in) {
  s.bf16 = bf16;
  ConvRun run;
  absl::StatusOr<std::unique_ptr<Conv2DOp>> conv = Conv2DOp::Create(s, engine);
  EXPECT_TRUE(conv.ok()) << conv.status();
  if (!conv.ok()) return run;
  run.y.resize(OutSize(s));
  run.dx.resize(Size(s));
  run.dw.resize(KernelSize(s));
  run.db.resize(s.out_channels);
  EXPECT_TRUE(
      (*conv)
          ->Forward(in.x.data(), in.w.data(), 7, in.bias(s), run.y.data())
          .ok());
  EXPECT_TRUE((*conv)
                  ->Backward(in.x.data(), in.w.data(), 7, in.dy.data(),
                             s.compute_dx ? run.dx.data() : nullptr,
                             run.dw.data(),
                             s.use_bias ? run.db.data() : nullptr)
                  .ok());
  run.conversions = (*conv)->bf16_conversions();
  run.weight_reorders = (*conv)->weight_reorder_count();
  return run;
}

TEST(Conv2DOp, Bf16IsCloseToFloat32ForwardAndBackward) {
  PSTRAIN_SKIP_WITHOUT_BF16();
  std::unique_ptr<Engine> engine = MakeEngine();
  // The seed cnn's convolutions (28x28x1 -> 32, 13x13x32 -> 64, the first
  // without dx), with a fused ReLU, strided, depthwise, dilated, Conv1D's
  // causal padding.
  Conv2DShape first;
  first.batch = 8;
  first.height = first.width = 28;
  first.in_channels = 1;
  first.out_channels = 32;
  first.kernel_h = first.kernel_w = 3;
  first.compute_dx = false;
  first.fuse_relu = true;
  Conv2DShape second = first;
  second.height = second.width = 13;
  second.in_channels = 32;
  second.out_channels = 64;
  second.compute_dx = true;
  Conv2DShape strided = second;
  strided.stride_h = strided.stride_w = 2;
  strided.padding = Padding::kSame;
  strided.fuse_relu = false;
  strided.use_bias = false;
  Conv2DShape depthwise = second;
  depthwise.groups = depthwise.in_channels = depthwise.out_channels = 16;
  Conv2DShape dilated = second;
  dilated.dilation_h = dilated.dilation_w = 2;
  dilated.padding = Padding::kSame;
  Conv2DShape causal;
  causal.batch = 4;
  causal.height = 1;
  causal.width = 20;
  causal.in_channels = 8;
  causal.out_channels = 16;
  causal.kernel_h = 1;
  causal.kernel_w = 3;
  causal.padding = Padding::kCausal;
  for (const Conv2DShape& s :
       {first, second, strided, depthwise, dilated, causal}) {
    SCOPED_TRACE(Describe(s));
    Buffers buf(s, 5);
    const ConvRun fp32 = RunConv(s, false, engine.get(), buf);
    const ConvRun bf16 = RunConv(s, true, engine.get(), buf);
    EXPECT_LE(MaxRelativeDifference(bf16.y, fp32.y), kBf16Tolerance);
    if (s.compute_dx) {
      EXPECT_LE(MaxRelativeDifference(bf16.dx, fp32.dx), kBf16Tolerance);
    }
    EXPECT_LE(MaxRelativeDifference(bf16.dw, fp32.dw), kBf16Tolerance);
    EXPECT_LE(MaxRelativeDifference(bf16.db, fp32.db), kBf16Tolerance);
    EXPECT_GT(MaxRelativeDifference(bf16.y, fp32.y), 0) << "not bf16";
    // x and dy converted once each; the kernel once (to bf16) for both
    // forward and backward data, unless they want different layouts.
    EXPECT_EQ(bf16.conversions, 2);
    EXPECT_GE(bf16.weight_reorders, 1);
    EXPECT_LE(bf16.weight_reorders, s.compute_dx ? 2 : 1);
  }
}

// A Backward of another x than the last Forward's converts that x: dw is
// that of its own x.
TEST(Conv2DOp, Bf16BackwardConvertsAnXTheForwardDidNotSee) {
  PSTRAIN_SKIP_WITHOUT_BF16();
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape s;
  s.batch = 2;
  s.height = s.width = 9;
  s.in_channels = 4;
  s.out_channels = 8;
  s.kernel_h = s.kernel_w = 3;
  Buffers first(s, 40), second(s, 50);
  const ConvRun fp32 = RunConv(s, false, engine.get(), second);
  s.bf16 = true;
  absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
      Conv2DOp::Create(s, engine.get());
  ASSERT_TRUE(conv.ok()) << conv.status();
  ASSERT_TRUE((*conv)
                  ->Forward(first.x.data(), second.w.data(), 7, first.b.data(),
                            first.y.data())
                  .ok());
  ASSERT_TRUE((*conv)
                  ->Backward(second.x.data(), second.w.data(), 7,
                             second.dy.data(), second.dx.data(),
                             second.dw.data(), second.db.data())
                  .ok());
  EXPECT_LE(MaxRelativeDifference(second.dw, fp32.dw), kBf16Tolerance);
  EXPECT_LE(MaxRelativeDifference(second.dx, fp32.dx), kBf16Tolerance);
  EXPECT_EQ((*conv)->bf16_conversions(), 3);  // x, x again, dy.
}

TEST(Conv2DOp, RejectsBadShapesAndArguments) {
  std::unique_ptr<Engine> engine = MakeEngine();
  Conv2DShape too_big = Small(Padding::kValid, 1);
  too_big.kernel_h = 6;
  EXPECT_EQ(Conv2DOp::Create(too_big, engine.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  Conv2DShape empty = Small(Padding::kSame, 1);
  empty.batch = 0;
  EXPECT_EQ(Conv2DOp::Create(empty, engine.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  Conv2DShape s = Small(Padding::kSame, 1);
  absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
      Conv2DOp::Create(s, engine.get());
  ASSERT_TRUE(conv.ok());
  Buffers buf(s);
  // use_bias without b.
  EXPECT_EQ((*conv)
                ->Forward(buf.x.data(), buf.w.data(), 0, nullptr, buf.y.data())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
