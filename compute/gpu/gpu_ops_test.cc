// Every GPU op, forward and backward, against a CPU reference on the same
// seeded random inputs:
// - Conv2D, MaxPool2D, Dense, ReLU, Softmax and Embedding against naive loops in double
//   precision written here (the CPU ops on oneDNN are validated against such
//   loops too; oneDNN is not linked, so this binary runs on GPU machines
//   without it);
// - the losses, accuracy, dropout and L2 against compute/cpu's own functions
//   (plain C++, no oneDNN).
//
// Tolerance for float32 results: the error relative to the reference's
// largest magnitude, max_i |gpu_i - ref_i| <= 1e-4 * max_i |ref_i| (kRelative
// below). Dropout masks and outputs, ReLU, MaxPool2D forward and accuracy
// counts must be exactly equal.
//
// Without a GPU every GPU test skips, printing "skipped: no usable GPU
// (<reason>)"; the argument checks at the end need no GPU and always run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_probe.h"
#include "compute/cpu/dropout.h"
#include "compute/cpu/l2.h"
#include "compute/cpu/losses.h"
#include "compute/cpu/window.h"
#include "compute/gpu/conv2d.h"
#include "compute/gpu/dense.h"
#include "compute/gpu/device.h"
#include "compute/gpu/dropout.h"
#include "compute/gpu/embedding.h"
#include "compute/gpu/l2.h"
#include "compute/gpu/losses.h"
#include "compute/gpu/max_pool2d.h"
#include "compute/gpu/nccl_all_reduce.h"
#include "compute/gpu/relu.h"
#include "compute/gpu/softmax.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr double kRelative = 1e-4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------
// Helpers.

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 generator(seed);
  std::vector<float> values(n);
  for (float& v : values) {
    v = static_cast<float>(lo + (hi - lo) * (generator() / 4294967296.0));
  }
  return values;
}

std::vector<int32_t> RandomLabels(int64_t n, int64_t classes, uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<int32_t> labels(n);
  for (int32_t& label : labels) label = generator() % classes;
  return labels;
}

::testing::AssertionResult Near(const std::vector<float>& got,
                                const std::vector<double>& want,
                                double relative = kRelative) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << want.size();
  }
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  const double bound = relative * std::max(scale, 1e-30);
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(got[i] - want[i]);
    if (!(error <= worst)) {  // Also catches NaN (never-written elements).
      worst =
          std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      worst_index = i;
    }
  }
  if (worst <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_index << " is " << got[worst_index]
         << ", the reference " << want[worst_index] << ": error " << worst
         << " > " << relative << " * max|ref| " << scale;
}

// Uploads and downloads with the device; a failure fails the test and
// leaves an empty buffer (the ops then reject the null pointer).
class GpuOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> count = CudaDeviceCount();
    if (!count.ok()) {
      GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message()
                   << ")";
    }
    absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
  }

  template <typename T>
  DeviceBuffer Upload(const std::vector<T>& host) {
    absl::StatusOr<DeviceBuffer> buffer =
        device_->Allocate(host.size() * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return DeviceBuffer();
    const absl::Status status =
        device_->CopyToDevice(host.data(), buffer->bytes(), buffer->data());
    EXPECT_TRUE(status.ok()) << status;
    return std::move(*buffer);
  }

  // n floats set to NaN, so an element an op forgets to write shows up.
  DeviceBuffer Output(int64_t n) { return Upload(std::vector<float>(n, kNaN)); }

  std::vector<float> Download(const DeviceBuffer& buffer) {
    std::vector<float> host(buffer.bytes() / sizeof(float), kNaN);
    const absl::Status status =
        device_->CopyToHost(buffer.data(), buffer.bytes(), host.data());
    EXPECT_TRUE(status.ok()) << status;
    return host;
  }

  std::unique_ptr<Device> device_;
};

// ---------------------------------------------------------------------------
// Conv2D.

struct ConvReference {
  std::vector<double> y, dx, dw, db;
};

// Keras's Conv2D by definition, in double: y[n, oh, ow, o] = b[o] +
// sum x[n, oh * sh - top + i, ow * sw - left + j, c] w[i, j, c, o] over the
// taps inside the input (zero padding), and the gradients for dy.
ConvReference ConvByLoops(const Conv2DShape& s, const Window& wh,
                          const Window& ww, const std::vector<float>& x,
                          const std::vector<float>& w,
                          const std::vector<float>& b,
                          const std::vector<float>& dy) {
  const int64_t oh_n = wh.output, ow_n = ww.output;
  const int64_t ci_n = s.in_channels, co_n = s.out_channels;
  ConvReference r;
  r.y.assign(s.batch * oh_n * ow_n * co_n, 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.db.assign(co_n, 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        for (int64_t co = 0; co < co_n; ++co) {
          const int64_t yi = ((n * oh_n + oh) * ow_n + ow) * co_n + co;
          double sum = s.use_bias ? b[co] : 0.0;
          const double g = dy[yi];
          r.db[co] += g;
          for (int64_t i = 0; i < s.kernel_h; ++i) {
            const int64_t ih = oh * s.stride_h - wh.pad_before + i;
            if (ih < 0 || ih >= s.height) continue;
            for (int64_t j = 0; j < s.kernel_w; ++j) {
              const int64_t iw = ow * s.stride_w - ww.pad_before + j;
              if (iw < 0 || iw >= s.width) continue;
              for (int64_t ci = 0; ci < ci_n; ++ci) {
                const int64_t xi =
                    ((n * s.height + ih) * s.width + iw) * ci_n + ci;
                const int64_t wi =
                    ((i * s.kernel_w + j) * ci_n + ci) * co_n + co;
                sum += static_cast<double>(x[xi]) * w[wi];
                r.dx[xi] += g * w[wi];
                r.dw[wi] += g * x[xi];
              }
            }
          }
          r.y[yi] = sum;
        }
      }
    }
  }
  return r;
}

struct ConvCase {
  const char* name;
  int64_t batch, height, width, in, out, kh, kw, sh, sw;
  Padding padding;
  bool use_bias;
  bool compute_dx;
  bool expect_padded_input;
};

TEST_F(GpuOpsTest, Conv2DMatchesLoopsForValidAndSamePaddingAndStrides) {
  const ConvCase cases[] = {
      {"valid s1", 2, 8, 8, 3, 4, 3, 3, 1, 1, Padding::kValid, true, true,
       false},
      {"valid s2 odd height", 2, 9, 8, 3, 5, 3, 3, 2, 2, Padding::kValid, true,
       true, false},
      {"same s1 k3 (pad 1, 1)", 2, 7, 6, 4, 3, 3, 3, 1, 1, Padding::kSame, true,
       true, false},
      {"same s2 k3 even input (pad 0, 1)", 3, 8, 8, 2, 4, 3, 3, 2, 2,
       Padding::kSame, true, true, true},
      {"same s1 k4 (pad 1, 2)", 2, 6, 7, 3, 2, 4, 4, 1, 1, Padding::kSame, true,
       true, true},
      {"same s2 k5 mixed (h 2,2; w 1,2)", 2, 7, 10, 3, 4, 5, 5, 2, 2,
       Padding::kSame, true, true, true},
      {"same s2 first layer, no bias", 4, 28, 28, 1, 8, 3, 3, 2, 2,
       Padding::kSame, false, false, true},
      {"valid s2 first layer", 4, 28, 28, 1, 32, 3, 3, 2, 2, Padding::kValid,
       true, false, false},
      {"same s1 wide channels", 8, 14, 14, 32, 64, 3, 3, 1, 1, Padding::kSame,
       true, true, false},
  };
  uint32_t seed = 100;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    Conv2DShape s;
    s.batch = c.batch;
    s.height = c.height;
    s.width = c.width;
    s.in_channels = c.in;
    s.out_channels = c.out;
    s.kernel_h = c.kh;
    s.kernel_w = c.kw;
    s.stride_h = c.sh;
    s.stride_w = c.sw;
    s.padding = c.padding;
    s.use_bias = c.use_bias;
    s.compute_dx = c.compute_dx;
    absl::StatusOr<std::unique_ptr<Conv2DOp>> op =
        Conv2DOp::Create(s, device_.get());
    ASSERT_TRUE(op.ok()) << op.status();
    Conv2DOp& conv = **op;
    EXPECT_EQ(conv.pads_input(), c.expect_padded_input);
    std::printf("  %s: cuDNN algorithms fwd %d, bwd-data %d, bwd-filter %d\n",
                c.name, static_cast<int>(conv.forward_algorithm()),
                static_cast<int>(conv.backward_data_algorithm()),
                static_cast<int>(conv.backward_filter_algorithm()));
    absl::StatusOr<Window> wh =
        cpu::KerasWindow(s.height, s.kernel_h, s.stride_h, s.padding);
    absl::StatusOr<Window> ww =
        cpu::KerasWindow(s.width, s.kernel_w, s.stride_w, s.padding);
    ASSERT_TRUE(wh.ok() && ww.ok());
    ASSERT_EQ(conv.out_height(), wh->output);
    ASSERT_EQ(conv.out_width(), ww->output);

    const int64_t y_n = s.batch * wh->output * ww->output * s.out_channels;
    const std::vector<float> x =
        RandomFloats(s.batch * s.height * s.width * s.in_channels, ++seed);
    const std::vector<float> w = RandomFloats(
        s.kernel_h * s.kernel_w * s.in_channels * s.out_channels, ++seed);
    const std::vector<float> b = RandomFloats(s.out_channels, ++seed);
    const std::vector<float> dy = RandomFloats(y_n, ++seed);
    const ConvReference want = ConvByLoops(s, *wh, *ww, x, w, b, dy);

    DeviceBuffer dx_ = Upload(x), dw_ = Upload(w), db_ = Upload(b);
    DeviceBuffer ddy = Upload(dy);
    DeviceBuffer y = Output(y_n);
    DeviceBuffer gx = Output(x.size()), gw = Output(w.size());
    DeviceBuffer gb = Output(b.size());
    ASSERT_TRUE(conv.Forward(dx_.floats(), dw_.floats(), /*weights_step=*/1,
                             s.use_bias ? db_.floats() : nullptr, y.floats())
                    .ok());
    ASSERT_TRUE(
        conv.Backward(dx_.floats(), s.compute_dx ? dw_.floats() : nullptr, 1,
                      ddy.floats(), s.compute_dx ? gx.floats() : nullptr,
                      gw.floats(), s.use_bias ? gb.floats() : nullptr)
            .ok());
    ASSERT_TRUE(device_->Synchronize().ok());
    EXPECT_TRUE(Near(Download(y), want.y)) << "y";
    if (s.compute_dx) {
      EXPECT_TRUE(Near(Download(gx), want.dx)) << "dx";
    }
    EXPECT_TRUE(Near(Download(gw), want.dw)) << "dw";
    if (s.use_bias) {
      EXPECT_TRUE(Near(Download(gb), want.db)) << "db";
    }
  }
}

TEST_F(GpuOpsTest, Conv2DTransposesTheKernelOncePerWeightsStep) {
  Conv2DShape s;
  s.batch = 2;
  s.height = s.width = 6;
  s.in_channels = 2;
  s.out_channels = 3;
  s.kernel_h = s.kernel_w = 3;
  absl::StatusOr<std::unique_ptr<Conv2DOp>> op =
      Conv2DOp::Create(s, device_.get());
  ASSERT_TRUE(op.ok()) << op.status();
  DeviceBuffer x = Upload(RandomFloats(2 * 6 * 6 * 2, 1));
  std::vector<float> w_host = RandomFloats(3 * 3 * 2 * 3, 2);
  DeviceBuffer w = Upload(w_host), b = Upload(RandomFloats(3, 3));
  DeviceBuffer dy = Upload(RandomFloats(2 * 4 * 4 * 3, 4));
  DeviceBuffer y = Output(2 * 4 * 4 * 3), dx = Output(2 * 6 * 6 * 2);
  DeviceBuffer dw = Output(w_host.size()), db = Output(3);
  Conv2DOp& conv = **op;
  ASSERT_TRUE(
      conv.Forward(x.floats(), w.floats(), 5, b.floats(), y.floats()).ok());
  ASSERT_TRUE(conv.Backward(x.floats(), w.floats(), 5, dy.floats(), dx.floats(),
                            dw.floats(), db.floats())
                  .ok());
  EXPECT_EQ(conv.weight_transpose_count(), 1);
  // New values under a new step: the cached copy must be refreshed.
  for (float& v : w_host) v *= -2.0f;
  ASSERT_TRUE(device_->CopyToDevice(w_host.data(), w.bytes(), w.data()).ok());
  ASSERT_TRUE(
      conv.Forward(x.floats(), w.floats(), 6, b.floats(), y.floats()).ok());
  EXPECT_EQ(conv.weight_transpose_count(), 2);
  ASSERT_TRUE(device_->Synchronize().ok());
  absl::StatusOr<Window> win = cpu::KerasWindow(6, 3, 1, Padding::kValid);
  ASSERT_TRUE(win.ok());
  const ConvReference want = ConvByLoops(s, *win, *win, Download(x), w_host,
                                         Download(b), Download(dy));
  EXPECT_TRUE(Near(Download(y), want.y));
}

// ---------------------------------------------------------------------------
// MaxPool2D.

struct PoolReference {
  std::vector<double> y, dx;
};

// Keras's MaxPool2D: the maximum over the window's positions inside the
// input (padding never wins); the gradient goes to the first maximum.
PoolReference PoolByLoops(const Pool2DShape& s, const Window& wh,
                          const Window& ww, const std::vector<float>& x,
                          const std::vector<float>& dy) {
  PoolReference r;
  r.y.assign(s.batch * wh.output * ww.output * s.channels, 0.0);
  r.dx.assign(x.size(), 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t oh = 0; oh < wh.output; ++oh) {
      for (int64_t ow = 0; ow < ww.output; ++ow) {
        for (int64_t c = 0; c < s.channels; ++c) {
          double best = -std::numeric_limits<double>::infinity();
          int64_t best_index = -1;
          for (int64_t i = 0; i < s.pool_h; ++i) {
            const int64_t ih = oh * s.stride_h - wh.pad_before + i;
            if (ih < 0 || ih >= s.height) continue;
            for (int64_t j = 0; j < s.pool_w; ++j) {
              const int64_t iw = ow * s.stride_w - ww.pad_before + j;
              if (iw < 0 || iw >= s.width) continue;
              const int64_t xi =
                  ((n * s.height + ih) * s.width + iw) * s.channels + c;
              if (x[xi] > best) {
                best = x[xi];
                best_index = xi;
              }
            }
          }
          const int64_t yi =
              ((n * wh.output + oh) * ww.output + ow) * s.channels + c;
          r.y[yi] = best;
          r.dx[best_index] += dy[yi];
        }
      }
    }
  }
  return r;
}

TEST_F(GpuOpsTest, MaxPool2DMatchesLoopsForValidAndSamePadding) {
  struct Case {
    const char* name;
    int64_t batch, height, width, channels, ph, pw, sh, sw;
    Padding padding;
    bool expect_padded_input;
  };
  const Case cases[] = {
      {"valid 2x2 s2 even", 2, 8, 8, 3, 2, 2, 2, 2, Padding::kValid, false},
      {"valid 2x2 s2 odd (drops last)", 2, 7, 9, 3, 2, 2, 2, 2, Padding::kValid,
       false},
      {"valid 3x3 s2 overlapping", 2, 9, 9, 2, 3, 3, 2, 2, Padding::kValid,
       false},
      {"same 2x2 s2 even (no pad)", 2, 8, 6, 4, 2, 2, 2, 2, Padding::kSame,
       false},
      {"same 2x2 s2 odd (pad 0, 1)", 2, 7, 7, 4, 2, 2, 2, 2, Padding::kSame,
       true},
      {"same 3x3 s1 (pad 1, 1)", 2, 6, 5, 3, 3, 3, 1, 1, Padding::kSame, true},
      {"same 3x3 s2 even (pad 0, 1)", 2, 8, 8, 3, 3, 3, 2, 2, Padding::kSame,
       true},
      {"same 4x4 s1 (pad 1, 2)", 1, 6, 6, 2, 4, 4, 1, 1, Padding::kSame, true},
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Pool2DShape s;
    s.batch = c.batch;
    s.height = c.height;
    s.width = c.width;
    s.channels = c.channels;
    s.pool_h = c.ph;
    s.pool_w = c.pw;
    s.stride_h = c.sh;
    s.stride_w = c.sw;
    s.padding = c.padding;
    absl::StatusOr<std::unique_ptr<MaxPool2DOp>> op =
        MaxPool2DOp::Create(s, device_.get());
    ASSERT_TRUE(op.ok()) << op.status();
    MaxPool2DOp& pool = **op;
    EXPECT_EQ(pool.pads_input(), c.expect_padded_input);
    absl::StatusOr<Window> wh =
        cpu::KerasWindow(s.height, s.pool_h, s.stride_h, s.padding);
    absl::StatusOr<Window> ww =
        cpu::KerasWindow(s.width, s.pool_w, s.stride_w, s.padding);
    ASSERT_TRUE(wh.ok() && ww.ok());
    const int64_t y_n = s.batch * wh->output * ww->output * s.channels;
    // All negative in part: zero padding would win there, -inf must not.
    const std::vector<float> x = RandomFloats(
        s.batch * s.height * s.width * s.channels, ++seed, -2.0f, 0.5f);
    const std::vector<float> dy = RandomFloats(y_n, ++seed);
    const PoolReference want = PoolByLoops(s, *wh, *ww, x, dy);

    DeviceBuffer gx = Upload(x), gdy = Upload(dy);
    DeviceBuffer y = Output(y_n), dx = Output(x.size());
    EXPECT_EQ(pool.Backward(gdy.floats(), dx.floats()).code(),
              absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(pool.Forward(gx.floats(), y.floats()).ok());
    // Backward must not depend on the caller keeping x and y.
    const std::vector<float> garbage(x.size(), 100.0f);
    ASSERT_TRUE(
        device_->CopyToDevice(garbage.data(), gx.bytes(), gx.data()).ok());
    const std::vector<float> y_got = Download(y);
    ASSERT_TRUE(pool.Backward(gdy.floats(), dx.floats()).ok());
    ASSERT_TRUE(device_->Synchronize().ok());
    EXPECT_TRUE(Near(y_got, want.y, 0.0)) << "y (a maximum is exact)";
    EXPECT_TRUE(Near(Download(dx), want.dx)) << "dx";
  }
}

// ---------------------------------------------------------------------------
// Dense.

TEST_F(GpuOpsTest, DenseMatchesLoops) {
  struct Case {
    int64_t batch, in, out;
    bool use_bias, compute_dx;
  };
  const Case cases[] = {{7, 33, 10, true, true},
                        {32, 784, 128, true, false},
                        {5, 16, 1, false, true}};
  uint32_t seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.batch << "x" << c.in << "x" << c.out);
    DenseShape s;
    s.batch = c.batch;
    s.in = c.in;
    s.out = c.out;
    s.use_bias = c.use_bias;
    s.compute_dx = c.compute_dx;
    absl::StatusOr<std::unique_ptr<DenseOp>> op =
        DenseOp::Create(s, device_.get());
    ASSERT_TRUE(op.ok()) << op.status();
    const std::vector<float> x = RandomFloats(c.batch * c.in, ++seed);
    const std::vector<float> w = RandomFloats(c.in * c.out, ++seed);
    const std::vector<float> b = RandomFloats(c.out, ++seed);
    const std::vector<float> dy = RandomFloats(c.batch * c.out, ++seed);
    std::vector<double> y(c.batch * c.out), dx(x.size(), 0.0),
        dw(w.size(), 0.0), db(c.out, 0.0);
    for (int64_t n = 0; n < c.batch; ++n) {
      for (int64_t o = 0; o < c.out; ++o) {
        double sum = c.use_bias ? b[o] : 0.0;
        const double g = dy[n * c.out + o];
        db[o] += g;
        for (int64_t i = 0; i < c.in; ++i) {
          sum += static_cast<double>(x[n * c.in + i]) * w[i * c.out + o];
          dx[n * c.in + i] += g * w[i * c.out + o];
          dw[i * c.out + o] += g * x[n * c.in + i];
        }
        y[n * c.out + o] = sum;
      }
    }
    DeviceBuffer gx = Upload(x), gw = Upload(w), gb = Upload(b);
    DeviceBuffer gdy = Upload(dy);
    DeviceBuffer gy = Output(y.size()), gdx = Output(x.size());
    DeviceBuffer gdw = Output(w.size()), gdb = Output(b.size());
    DenseOp& dense = **op;
    ASSERT_TRUE(dense
                    .Forward(gx.floats(), gw.floats(),
                             c.use_bias ? gb.floats() : nullptr, gy.floats())
                    .ok());
    ASSERT_TRUE(dense
                    .Backward(gx.floats(), gw.floats(), gdy.floats(),
                              c.compute_dx ? gdx.floats() : nullptr,
                              gdw.floats(), c.use_bias ? gdb.floats() : nullptr)
                    .ok());
    ASSERT_TRUE(device_->Synchronize().ok());
    EXPECT_TRUE(Near(Download(gy), y)) << "y";
    if (c.compute_dx) {
      EXPECT_TRUE(Near(Download(gdx), dx)) << "dx";
    }
    EXPECT_TRUE(Near(Download(gdw), dw)) << "dw";
    if (c.use_bias) {
      EXPECT_TRUE(Near(Download(gdb), db)) << "db";
    }
  }
}

// ---------------------------------------------------------------------------
// ReLU and Softmax.

TEST_F(GpuOpsTest, ReluMatchesLoopsExactlyInPlaceToo) {
  const int64_t n = 100003;
  const std::vector<float> x = RandomFloats(n, 400);
  const std::vector<float> dy = RandomFloats(n, 401);
  std::vector<double> y(n), dx(n);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] > 0 ? x[i] : 0.0;
    dx[i] = y[i] > 0 ? dy[i] : 0.0;
  }
  absl::StatusOr<std::unique_ptr<ReluOp>> op = ReluOp::Create(n, device_.get());
  ASSERT_TRUE(op.ok()) << op.status();
  DeviceBuffer gx = Upload(x), gdy = Upload(dy);
  ASSERT_TRUE((*op)->Forward(gx.floats(), gx.floats()).ok());  // In place.
  ASSERT_TRUE((*op)->Backward(gx.floats(), gdy.floats(), gdy.floats()).ok());
  ASSERT_TRUE(device_->Synchronize().ok());
  EXPECT_TRUE(Near(Download(gx), y, 0.0)) << "y";
  EXPECT_TRUE(Near(Download(gdy), dx, 0.0)) << "dx";
}

TEST_F(GpuOpsTest, SoftmaxMatchesLoops) {
  const int64_t batch = 19, classes = 10;
  const std::vector<float> x = RandomFloats(batch * classes, 500, -6, 6);
  const std::vector<float> dy = RandomFloats(batch * classes, 501);
  std::vector<double> y(x.size()), dx(x.size());
  std::vector<float> y_float(x.size());
  for (int64_t i = 0; i < batch; ++i) {
    double max = x[i * classes], sum = 0, dot = 0;
    for (int64_t j = 0; j < classes; ++j)
      max = std::max<double>(max, x[i * classes + j]);
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(x[i * classes + j] - max);
    for (int64_t j = 0; j < classes; ++j) {
      y[i * classes + j] = std::exp(x[i * classes + j] - max) / sum;
      dot += dy[i * classes + j] * y[i * classes + j];
    }
    for (int64_t j = 0; j < classes; ++j) {
      dx[i * classes + j] = y[i * classes + j] * (dy[i * classes + j] - dot);
    }
  }
  SoftmaxShape s;
  s.batch = batch;
  s.classes = classes;
  absl::StatusOr<std::unique_ptr<SoftmaxOp>> op =
      SoftmaxOp::Create(s, device_.get());
  ASSERT_TRUE(op.ok()) << op.status();
  DeviceBuffer gx = Upload(x), gdy = Upload(dy);
  DeviceBuffer gy = Output(x.size()), gdx = Output(x.size());
  ASSERT_TRUE((*op)->Forward(gx.floats(), gy.floats()).ok());
  ASSERT_TRUE((*op)->Backward(gy.floats(), gdy.floats(), gdx.floats()).ok());
  ASSERT_TRUE(device_->Synchronize().ok());
  EXPECT_TRUE(Near(Download(gy), y)) << "y";
  EXPECT_TRUE(Near(Download(gdx), dx)) << "dx";
}

// ---------------------------------------------------------------------------
// Losses and accuracy, against compute/cpu/losses.h.

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

TEST_F(GpuOpsTest, LossesMatchTheCpuLosses) {
  const int64_t batch = 37, classes = 10;
  absl::StatusOr<std::unique_ptr<Losses>> made =
      Losses::Create(64, device_.get());
  ASSERT_TRUE(made.ok()) << made.status();
  Losses& losses = **made;
  const std::vector<float> logits = RandomFloats(batch * classes, 600, -5, 5);
  const std::vector<int32_t> labels = RandomLabels(batch, classes, 601);
  // Probabilities with clipped entries on both sides of Keras's range.
  std::vector<float> probs = RandomFloats(batch * classes, 602, 0, 1);
  probs[0] = 0.0f;
  probs[5] = 1.0f;
  probs[13] = 1e-9f;
  const std::vector<float> targets = RandomFloats(batch * classes, 603);
  DeviceBuffer g_logits = Upload(logits), g_labels = Upload(labels);
  DeviceBuffer g_probs = Upload(probs), g_targets = Upload(targets);
  DeviceBuffer g_grad = Output(batch * classes);
  const int32_t* lab = g_labels.as<int32_t>();

  {
    SCOPED_TRACE("softmax cross-entropy from logits");
    std::vector<float> want_grad(batch * classes);
    absl::StatusOr<double> want = cpu::SparseSoftmaxCrossEntropyFromLogits(
        logits.data(), labels.data(), batch, classes, want_grad.data());
    absl::StatusOr<double> got = losses.SparseSoftmaxCrossEntropyFromLogits(
        g_logits.floats(), lab, batch, classes, g_grad.floats());
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    EXPECT_NEAR(*got, *want, 1e-12 * std::fabs(*want));
    EXPECT_TRUE(Near(Download(g_grad), ToDouble(want_grad), 1e-6));
    // Without a gradient, the same loss.
    absl::StatusOr<double> loss_only =
        losses.SparseSoftmaxCrossEntropyFromLogits(g_logits.floats(), lab,
                                                   batch, classes, nullptr);
    ASSERT_TRUE(loss_only.ok()) << loss_only.status();
    EXPECT_EQ(*loss_only, *got);
  }
  {
    SCOPED_TRACE("cross-entropy from probabilities");
    std::vector<float> want_grad(batch * classes);
    absl::StatusOr<double> want = cpu::SparseCrossEntropyFromProbabilities(
        probs.data(), labels.data(), batch, classes, want_grad.data());
    absl::StatusOr<double> got = losses.SparseCrossEntropyFromProbabilities(
        g_probs.floats(), lab, batch, classes, g_grad.floats());
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    EXPECT_NEAR(*got, *want, 1e-12 * std::fabs(*want));
    EXPECT_TRUE(Near(Download(g_grad), ToDouble(want_grad), 1e-6));
  }
  {
    SCOPED_TRACE("mean squared error");
    std::vector<float> want_grad(batch * classes);
    absl::StatusOr<double> want = cpu::MeanSquaredErrorSum(
        logits.data(), targets.data(), batch, classes, want_grad.data());
    absl::StatusOr<double> got = losses.MeanSquaredErrorSum(
        g_logits.floats(), g_targets.floats(), batch, classes, g_grad.floats());
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    EXPECT_NEAR(*got, *want, 1e-12 * std::fabs(*want));
    EXPECT_TRUE(Near(Download(g_grad), ToDouble(want_grad), 1e-6));
  }
  {
    SCOPED_TRACE("accuracy");
    absl::StatusOr<int64_t> want =
        cpu::CountCorrect(logits.data(), labels.data(), batch, classes);
    absl::StatusOr<int64_t> got =
        losses.CountCorrect(g_logits.floats(), lab, batch, classes);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    EXPECT_EQ(*got, *want);
    // Labels equal to the argmax: all correct.
    std::vector<int32_t> argmax(batch);
    for (int64_t i = 0; i < batch; ++i) {
      argmax[i] = static_cast<int32_t>(
          std::max_element(logits.begin() + i * classes,
                           logits.begin() + (i + 1) * classes) -
          (logits.begin() + i * classes));
    }
    DeviceBuffer g_argmax = Upload(argmax);
    absl::StatusOr<int64_t> all = losses.CountCorrect(
        g_logits.floats(), g_argmax.as<int32_t>(), batch, classes);
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_EQ(*all, batch);
  }
}

TEST_F(GpuOpsTest, LossesRejectALabelOutOfRangeNamingTheExample) {
  absl::StatusOr<std::unique_ptr<Losses>> losses =
      Losses::Create(8, device_.get());
  ASSERT_TRUE(losses.ok()) << losses.status();
  std::vector<int32_t> labels = {1, 2, 0, 3, 1, 2, 0, 1};
  labels[5] = 10;
  labels[6] = -1;
  DeviceBuffer logits = Upload(RandomFloats(8 * 4, 700));
  DeviceBuffer g_labels = Upload(labels);
  absl::StatusOr<double> loss = (*losses)->SparseSoftmaxCrossEntropyFromLogits(
      logits.floats(), g_labels.as<int32_t>(), 8, 4, nullptr);
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loss.status().message().find("label 10 of example 5"),
            std::string::npos)
      << loss.status();
  absl::StatusOr<int64_t> correct =
      (*losses)->CountCorrect(logits.floats(), g_labels.as<int32_t>(), 8, 4);
  EXPECT_EQ(correct.status().code(), absl::StatusCode::kInvalidArgument);
  // More examples than the scratch holds.
  EXPECT_EQ((*losses)
                ->CountCorrect(logits.floats(), g_labels.as<int32_t>(), 9, 4)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Dropout and L2, against compute/cpu.

TEST_F(GpuOpsTest, DropoutMasksAndOutputsEqualTheCpuOpsForTheSameKey) {
  const int64_t n = 10007;
  const std::vector<float> x = RandomFloats(n, 800);
  const std::vector<float> dy = RandomFloats(n, 801);
  DeviceBuffer gx = Upload(x), gdy = Upload(dy);
  DeviceBuffer gy = Output(n), gdx = Output(n);
  for (float rate : {0.0f, 0.25f, 0.5f, 0.8f}) {
    for (uint64_t offset : {0ull, 3ull, 123457ull}) {
      SCOPED_TRACE(testing::Message()
                   << "rate " << rate << " offset " << offset);
      cpu::DropoutKey key;
      key.seed = 0xfeedface12345678ull;
      key.step = (uint64_t{3} << 32) + 17;
      key.offset = offset;
      absl::StatusOr<std::unique_ptr<cpu::DropoutOp>> cpu_op =
          cpu::DropoutOp::Create(n, rate);
      absl::StatusOr<std::unique_ptr<DropoutOp>> gpu_op =
          DropoutOp::Create(n, rate, device_.get());
      ASSERT_TRUE(cpu_op.ok() && gpu_op.ok()) << gpu_op.status();
      EXPECT_EQ((*gpu_op)->Backward(gdy.floats(), gdx.floats()).code(),
                absl::StatusCode::kFailedPrecondition);
      std::vector<float> want_y(n), want_dx(n);
      ASSERT_TRUE((*cpu_op)->Forward(x.data(), key, want_y.data()).ok());
      ASSERT_TRUE((*cpu_op)->Backward(dy.data(), want_dx.data()).ok());
      ASSERT_TRUE((*gpu_op)->Forward(gx.floats(), key, gy.floats()).ok());
      ASSERT_TRUE((*gpu_op)->Backward(gdy.floats(), gdx.floats()).ok());
      std::vector<uint8_t> mask;
      ASSERT_TRUE((*gpu_op)->CopyMaskToHost(&mask).ok());
      EXPECT_EQ(mask, (*cpu_op)->mask());
      EXPECT_EQ(Download(gy), want_y);    // Bitwise.
      EXPECT_EQ(Download(gdx), want_dx);  // Bitwise.
    }
  }
}

TEST_F(GpuOpsTest, L2MatchesTheCpuRegularizer) {
  const int64_t n = 50021;
  const float l2 = 1e-3f;
  const std::vector<float> w = RandomFloats(n, 900);
  std::vector<float> dw = RandomFloats(n, 901);
  DeviceBuffer gw = Upload(w), gdw = Upload(dw);
  const double want = cpu::AddL2Regularization(w.data(), n, l2, dw.data());
  absl::StatusOr<double> got =
      AddL2Regularization(gw.floats(), n, l2, gdw.floats(), device_.get());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(*got, want, kRelative * want);
  EXPECT_TRUE(Near(Download(gdw), ToDouble(dw)));
  // Penalty only.
  absl::StatusOr<double> penalty =
      AddL2Regularization(gw.floats(), n, l2, nullptr, device_.get());
  ASSERT_TRUE(penalty.ok()) << penalty.status();
  EXPECT_NEAR(*penalty, want, kRelative * want);
  absl::StatusOr<double> nothing =
      AddL2Regularization(gw.floats(), 0, l2, gdw.floats(), device_.get());
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(*nothing, 0.0);
}

// ---------------------------------------------------------------------------
// Embedding.

// L1 and L1L2 with a gradient scale (a batch), against the CPU's; a few
// exact zeros check sign(0) = 0.
TEST_F(GpuOpsTest, L1AndL1L2MatchTheCpuRegularizer) {
  const int64_t n = 30011;
  std::vector<float> w = RandomFloats(n, 902);
  for (int64_t i = 0; i < n; i += 97) w[i] = 0.0f;
  DeviceBuffer gw = Upload(w);
  for (const auto& [l1, l2] :
       {std::pair<float, float>{1e-3f, 0.0f}, {2e-3f, 5e-4f}}) {
    Regularizer r;
    r.l1 = l1;
    r.l2 = l2;
    std::vector<float> dw = RandomFloats(n, 903);
    DeviceBuffer gdw = Upload(dw);
    const double want = cpu::AddRegularization(w.data(), n, r, 6.0, dw.data());
    absl::StatusOr<double> got =
        AddRegularization(gw.floats(), n, r, 6.0, gdw.floats(), device_.get());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, want, kRelative * want);
    EXPECT_TRUE(Near(Download(gdw), ToDouble(dw)));
  }
}

TEST_F(GpuOpsTest, EmbeddingGathersRowsAndSumsRepeatedIdsGradients) {
  EmbeddingShape shape;
  shape.ids = 37;
  shape.input_dim = 11;
  shape.output_dim = 6;
  const std::vector<float> table =
      RandomFloats(shape.input_dim * shape.output_dim, 900);
  const std::vector<float> dy = RandomFloats(shape.ids * shape.output_dim, 901);
  // Every id appears several times (37 ids over 11 rows); row 10 never.
  std::vector<int32_t> ids(shape.ids);
  for (int64_t i = 0; i < shape.ids; ++i) ids[i] = (i * 7) % 10;
  std::vector<double> y(dy.size()), dtable(table.size(), 0.0);
  for (int64_t i = 0; i < shape.ids; ++i) {
    for (int64_t j = 0; j < shape.output_dim; ++j) {
      y[i * shape.output_dim + j] = table[ids[i] * shape.output_dim + j];
      dtable[ids[i] * shape.output_dim + j] += dy[i * shape.output_dim + j];
    }
  }
  ASSERT_TRUE(CheckEmbeddingIds(shape, ids.data()).ok());
  absl::StatusOr<std::unique_ptr<EmbeddingOp>> op =
      EmbeddingOp::Create(shape, device_.get());
  ASSERT_TRUE(op.ok()) << op.status();
  DeviceBuffer gids = Upload(ids), gtable = Upload(table), gdy = Upload(dy);
  DeviceBuffer gy = Output(y.size()), gdtable = Output(table.size());
  ASSERT_TRUE(
      (*op)->Forward(gids.as<int32_t>(), gtable.floats(), gy.floats()).ok());
  ASSERT_TRUE(
      (*op)->Backward(gids.as<int32_t>(), gdy.floats(), gdtable.floats()).ok());
  ASSERT_TRUE(device_->Synchronize().ok());
  EXPECT_TRUE(Near(Download(gy), y, 0.0)) << "y";
  EXPECT_TRUE(Near(Download(gdtable), dtable)) << "dtable";

  ids[5] = 11;
  const absl::Status bad = CheckEmbeddingIds(shape, ids.data());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("id 11 at position 5"), std::string::npos)
      << bad;
}

// ---------------------------------------------------------------------------
// NCCL across all local GPUs (one or more).

TEST(NcclAllReducer, SumsEveryGpusBufferIntoAll) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message()
                 << ")";
  }
  // With one GPU the all-reduce is one rank's identity; it still runs
  // NCCL's communicator set-up and the grouped call.
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Device*> raw;
  for (int i = 0; i < *count; ++i) {
    absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(i);
    ASSERT_TRUE(device.ok()) << device.status();
    raw.push_back(device->get());
    devices.push_back(std::move(*device));
  }
  absl::StatusOr<std::unique_ptr<NcclAllReducer>> reducer =
      NcclAllReducer::Create(raw);
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  const int64_t n = 1 << 20;
  std::vector<DeviceBuffer> buffers;
  std::vector<float*> pointers;
  std::vector<double> want(n, 0.0);
  for (int i = 0; i < *count; ++i) {
    // Small integers: their float sums are exact.
    std::vector<float> host(n);
    for (int64_t k = 0; k < n; ++k) {
      host[k] = static_cast<float>((k * (i + 3)) % 101 - 50);
      want[k] += host[k];
    }
    absl::StatusOr<DeviceBuffer> buffer = raw[i]->Allocate(n * sizeof(float));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(raw[i]
                    ->CopyToDevice(host.data(), buffer->bytes(), buffer->data())
                    .ok());
    pointers.push_back(buffer->floats());
    buffers.push_back(std::move(*buffer));
  }
  ASSERT_TRUE((*reducer)->AllReduceSum(pointers, n).ok());
  for (int i = 0; i < *count; ++i) {
    SCOPED_TRACE(testing::Message() << "GPU " << i);
    std::vector<float> got(n);
    ASSERT_TRUE(
        raw[i]
            ->CopyToHost(buffers[i].data(), buffers[i].bytes(), got.data())
            .ok());
    EXPECT_TRUE(Near(got, want, 0.0));
  }
  EXPECT_EQ((*reducer)->AllReduceSum({}, n).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Argument checks: no GPU needed (the device is checked last).

TEST(GpuOpArguments, BadShapesAreInvalidArgumentBeforeAnyGpuWork) {
  Conv2DShape conv;
  conv.batch = 1;
  conv.height = conv.width = 4;
  conv.in_channels = conv.out_channels = 1;
  conv.kernel_h = conv.kernel_w = 5;  // Larger than a valid input.
  absl::Status status = Conv2DOp::Create(conv, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  conv.kernel_h = conv.kernel_w = 3;
  status = Conv2DOp::Create(conv, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("device is required"), std::string::npos);
  conv.fuse_relu = true;  // A CPU-only option.
  status = Conv2DOp::Create(conv, nullptr).status();
  EXPECT_NE(status.message().find("fuse_relu is a CPU (oneDNN) option"),
            std::string::npos)
      << status;
  conv.fuse_relu = false;
  conv.stride_h = 0;
  status = Conv2DOp::Create(conv, nullptr).status();
  EXPECT_NE(status.message().find("stride_h"), std::string::npos) << status;

  Pool2DShape pool;
  pool.batch = 1;
  pool.height = pool.width = 1;
  pool.channels = 1;
  EXPECT_EQ(MaxPool2DOp::Create(pool, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);

  DenseShape dense;
  dense.batch = 1;
  dense.in = int64_t{1} << 40;  // Beyond cuBLAS's int.
  dense.out = 1;
  status = DenseOp::Create(dense, nullptr).status();
  EXPECT_NE(status.message().find("in must be in"), std::string::npos)
      << status;

  EXPECT_EQ(ReluOp::Create(0, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SoftmaxOp::Create(SoftmaxShape(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Losses::Create(0, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DropoutOp::Create(10, 1.0f, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      AddL2Regularization(nullptr, 1, 0.1f, nullptr, nullptr).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclAllReducer::Create({}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
