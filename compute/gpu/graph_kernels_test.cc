// The graph stages' CUDA kernels (graph_kernels.h) against the CPU ops they
// twin, on inputs chosen for the tricky cases: Maximum and Minimum merges
// and global max pooling with exact ties (the gradient goes to the first
// extreme, as on the CPU), AveragePooling2D with Keras's asymmetric "same"
// padding (the count excludes it), softmax and log_softmax along a middle
// axis, permutations of three and four axes, and every elementwise
// activation including the points where ReLU's pieces meet.
//
// Tolerance: |gpu - cpu| <= 1e-5 * max(1, |cpu|) per element (float32
// library functions differ in their last bits); tie routing and the
// permutation and pooling indices exactly. Without a GPU every test skips,
// printing why.
#include "compute/gpu/graph_kernels.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda_probe.h"
#include "common/cuda_status.h"
#include "compute/cpu/activation.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/merge.h"
#include "compute/cpu/permute.h"
#include "compute/cpu/pool2d.h"
#include "compute/cpu/window.h"
#include "compute/gpu/device.h"
#include "compute/gpu/stage_geometry.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    absl::StatusOr<int> count = CudaDeviceCount();                           \
    if (!count.ok()) {                                                       \
      GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message() \
                   << ")";                                                   \
    }                                                                        \
  } while (false)

// Host vectors to and from one GPU.
class Gpu {
 public:
  Gpu() {
    absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(0);
    EXPECT_TRUE(device.ok()) << device.status();
    if (device.ok()) device_ = std::move(*device);
  }
  bool ok() const { return device_ != nullptr; }
  cudaStream_t stream() const { return device_->stream(); }

  // A device copy of `host` (kept until the Gpu goes).
  float* Upload(const std::vector<float>& host) {
    float* p = Allocate(host.size());
    EXPECT_TRUE(
        device_->CopyToDevice(host.data(), host.size() * sizeof(float), p)
            .ok());
    return p;
  }
  float* Allocate(size_t floats) {
    absl::StatusOr<DeviceBuffer> buffer =
        device_->Allocate(std::max<size_t>(floats, 1) * sizeof(float));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    buffers_.push_back(std::move(*buffer));
    return buffers_.back().floats();
  }
  std::vector<float> Download(const float* p, size_t floats) {
    std::vector<float> host(floats);
    EXPECT_TRUE(device_->Synchronize().ok());
    EXPECT_TRUE(
        device_->CopyToHost(p, floats * sizeof(float), host.data()).ok());
    return host;
  }

 private:
  std::unique_ptr<Device> device_;
  std::vector<DeviceBuffer> buffers_;
};

::testing::AssertionResult Close(const std::vector<float>& got,
                                 const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << got.size() << " elements, want " << want.size();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::fabs(double{got[i]} - want[i]);
    if (!(error <= 1e-5 * std::max(1.0, std::fabs(double{want[i]})))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": GPU " << got[i] << ", CPU " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> Random(size_t n, uint32_t seed, float low = -2,
                          float high = 2) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(generator);
  return v;
}

std::unique_ptr<cpu::Engine> MakeEngine() {
  cpu::EngineOptions options;
  options.num_threads = 1;
  absl::StatusOr<std::unique_ptr<cpu::Engine>> engine =
      cpu::Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(GraphKernels, MaximumAndMinimumRouteTiesToTheFirstInputAsTheCpu) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  ASSERT_TRUE(gpu.ok());
  constexpr int64_t n = 64;
  // Three inputs drawn from {-1, 0, 1}: most elements tie somewhere.
  std::vector<std::vector<float>> x(3, std::vector<float>(n));
  std::mt19937 generator(5);
  for (auto& v : x) {
    for (float& e : v)
      e = static_cast<float>(static_cast<int>(generator() % 3) - 1);
  }
  const std::vector<float> dy = Random(n, 6);
  for (const auto& [op, kind] : std::vector<std::pair<MergeOp, MergeKind>>{
           {MergeOp::kMaximum, MergeKind::kMaximum},
           {MergeOp::kMinimum, MergeKind::kMinimum},
           {MergeOp::kMultiply, MergeKind::kMultiply},
           {MergeOp::kSubtract, MergeKind::kSubtract},
           {MergeOp::kAverage, MergeKind::kAverage}}) {
    SCOPED_TRACE(static_cast<int>(op));
    const int count = op == MergeOp::kSubtract ? 2 : 3;
    MergeInputs in;
    in.count = count;
    std::vector<const float*> host;
    for (int k = 0; k < count; ++k) {
      in.x[k] = gpu.Upload(x[k]);
      host.push_back(x[k].data());
    }
    std::vector<float> want(n);
    cpu::MergeForward(op, host, n, want.data());
    float* y = gpu.Allocate(n);
    ASSERT_EQ(LaunchMergeForward(kind, in, n, y, gpu.stream()), cudaSuccess);
    EXPECT_TRUE(Close(gpu.Download(y, n), want));
    const float* ddy = gpu.Upload(dy);
    for (int which = 0; which < count; ++which) {
      cpu::MergeBackward(op, host, dy.data(), n, which, want.data());
      float* dx = gpu.Allocate(n);
      ASSERT_EQ(LaunchMergeBackward(kind, in, ddy, n, which, dx, gpu.stream()),
                cudaSuccess);
      EXPECT_TRUE(Close(gpu.Download(dx, n), want)) << "input " << which;
    }
  }
}

TEST(GraphKernels, GlobalPoolingMatchesTheCpuWithTiedMaxima) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  ASSERT_TRUE(gpu.ok());
  constexpr int64_t batch = 3, steps = 7, channels = 5;
  std::vector<float> x = Random(batch * steps * channels, 8);
  // Ties: channel 0 of every example is 3 at steps 2 and 4 (the max).
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < steps; ++s) {
      x[(b * steps + s) * channels] = s == 2 || s == 4 ? 3.0f : -1.0f;
    }
  }
  const std::vector<float> dy = Random(batch * channels, 9);
  for (const bool max : {false, true}) {
    SCOPED_TRACE(max ? "max" : "average");
    cpu::GlobalPoolShape shape;
    shape.batch = batch;
    shape.steps = steps;
    shape.channels = channels;
    shape.mode =
        max ? cpu::GlobalPoolMode::kMax : cpu::GlobalPoolMode::kAverage;
    absl::StatusOr<std::unique_ptr<cpu::GlobalPoolOp>> op =
        cpu::GlobalPoolOp::Create(shape);
    ASSERT_TRUE(op.ok()) << op.status();
    std::vector<float> want_y(batch * channels), want_dx(x.size());
    ASSERT_TRUE((*op)->Forward(x.data(), want_y.data()).ok());
    ASSERT_TRUE((*op)->Backward(dy.data(), want_dx.data()).ok());
    const float* x_in = gpu.Upload(x);
    float* y = gpu.Allocate(want_y.size());
    float* dx = gpu.Allocate(x.size());
    ASSERT_EQ(LaunchGlobalPoolForward(x_in, batch, steps, channels, max, y,
                                      gpu.stream()),
              cudaSuccess);
    ASSERT_EQ(LaunchGlobalPoolBackward(x_in, y, gpu.Upload(dy), batch, steps,
                                       channels, max, dx, gpu.stream()),
              cudaSuccess);
    EXPECT_TRUE(Close(gpu.Download(y, want_y.size()), want_y));
    EXPECT_TRUE(Close(gpu.Download(dx, x.size()), want_dx));
  }
}

TEST(GraphKernels, AveragePoolingMatchesTheCpuWithAsymmetricSamePadding) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  ASSERT_TRUE(gpu.ok());
  std::unique_ptr<cpu::Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  struct Case {
    int64_t h, w, pool_h, pool_w, stride_h, stride_w;
    cpu::Padding padding;
  };
  for (const Case& c :
       std::vector<Case>{{5, 4, 2, 3, 2, 2, cpu::Padding::kSame},
                         {6, 6, 3, 3, 1, 1, cpu::Padding::kSame},
                         {7, 5, 3, 2, 2, 1, cpu::Padding::kSame},
                         {6, 5, 2, 2, 2, 2, cpu::Padding::kValid},
                         {5, 5, 3, 3, 1, 2, cpu::Padding::kValid}}) {
    SCOPED_TRACE(absl::StrCat(c.h, "x", c.w, " pool ", c.pool_h, "x", c.pool_w,
                              " stride ", c.stride_h, "x", c.stride_w));
    cpu::Pool2DShape shape;
    shape.batch = 2;
    shape.height = c.h;
    shape.width = c.w;
    shape.channels = 3;
    shape.pool_h = c.pool_h;
    shape.pool_w = c.pool_w;
    shape.stride_h = c.stride_h;
    shape.stride_w = c.stride_w;
    shape.padding = c.padding;
    absl::StatusOr<std::unique_ptr<cpu::AvgPool2DOp>> op =
        cpu::AvgPool2DOp::Create(shape, engine.get());
    ASSERT_TRUE(op.ok()) << op.status();
    const int64_t in = 2 * c.h * c.w * 3;
    const int64_t out = 2 * (*op)->out_height() * (*op)->out_width() * 3;
    const std::vector<float> x = Random(in, 10);
    const std::vector<float> dy = Random(out, 11);
    std::vector<float> want_y(out), want_dx(in);
    ASSERT_TRUE((*op)->Forward(x.data(), want_y.data()).ok());
    ASSERT_TRUE((*op)->Backward(dy.data(), want_dx.data()).ok());

    // The geometry graph_stage.cc hands the kernels.
    absl::StatusOr<AvgPoolGeometry> g = AvgPoolGeometryOf(shape, 2);
    ASSERT_TRUE(g.ok()) << g.status();
    float* y = gpu.Allocate(out);
    float* dx = gpu.Allocate(in);
    ASSERT_EQ(LaunchAvgPoolForward(gpu.Upload(x), *g, y, gpu.stream()),
              cudaSuccess);
    ASSERT_EQ(LaunchAvgPoolBackward(gpu.Upload(dy), *g, dx, gpu.stream()),
              cudaSuccess);
    EXPECT_TRUE(Close(gpu.Download(y, out), want_y));
    EXPECT_TRUE(Close(gpu.Download(dx, in), want_dx));
  }
}

TEST(GraphKernels, SoftmaxAndLogSoftmaxAlongAMiddleAxisMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  ASSERT_TRUE(gpu.ok());
  constexpr int64_t outer = 3, axis = 5, inner = 4, n = outer * axis * inner;
  const std::vector<float> x = Random(n, 12, -6, 6);
  const std::vector<float> dy = Random(n, 13);
  for (const bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    cpu::ActivationShape shape;
    shape.activation = log ? Activation::kLogSoftmax : Activation::kSoftmax;
    shape.outer = outer;
    shape.axis = axis;
    shape.inner = inner;
    absl::StatusOr<std::unique_ptr<cpu::ActivationOp>> op =
        cpu::ActivationOp::Create(shape);
    ASSERT_TRUE(op.ok()) << op.status();
    std::vector<float> want_y(n), want_dx(n);
    ASSERT_TRUE((*op)->Forward(x.data(), want_y.data()).ok());
    ASSERT_TRUE(
        (*op)
            ->Backward(x.data(), want_y.data(), dy.data(), want_dx.data())
            .ok());
    float* y = gpu.Allocate(n);
    float* dx = gpu.Allocate(n);
    ASSERT_EQ(LaunchAxisSoftmaxForward(gpu.Upload(x), outer, axis, inner, log,
                                       y, gpu.stream()),
              cudaSuccess);
    ASSERT_EQ(LaunchAxisSoftmaxBackward(y, gpu.Upload(dy), outer, axis, inner,
                                        log, dx, gpu.stream()),
              cudaSuccess);
    EXPECT_TRUE(Close(gpu.Download(y, n), want_y));
    EXPECT_TRUE(Close(gpu.Download(dx, n), want_dx));
  }
}

TEST(GraphKernels, EveryPointwiseActivationMatchesTheCpuAtItsKinks) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  ASSERT_TRUE(gpu.ok());
  std::vector<float> x = Random(200, 14, -4, 4);
  // Where ReLU(max_value 0.5, threshold 0.1) and hard_sigmoid change piece.
  for (const float kink : {0.1f, 0.5f, 0.0f, -3.0f, 3.0f}) x.push_back(kink);
  const int64_t n = static_cast<int64_t>(x.size());
  const std::vector<float> dy = Random(n, 15);
  struct Case {
    Activation cpu;
    PointwiseActivation gpu;
  };
  for (const Case& c : std::vector<Case>{
           {Activation::kKerasRelu, PointwiseActivation::kKerasRelu},
           {Activation::kGelu, PointwiseActivation::kGelu},
           {Activation::kGeluTanh, PointwiseActivation::kGeluTanh},
           {Activation::kSigmoid, PointwiseActivation::kSigmoid},
           {Activation::kHardSigmoid, PointwiseActivation::kHardSigmoid},
           {Activation::kTanh, PointwiseActivation::kTanh},
           {Activation::kSilu, PointwiseActivation::kSilu},
           {Activation::kElu, PointwiseActivation::kElu},
           {Activation::kSelu, PointwiseActivation::kSelu},
           {Activation::kSoftplus, PointwiseActivation::kSoftplus}}) {
    SCOPED_TRACE(static_cast<int>(c.cpu));
    cpu::ActivationShape shape;
    shape.activation = c.cpu;
    shape.params.max_value = 0.5f;
    shape.params.negative_slope = 0.2f;
    shape.params.threshold = 0.1f;
    shape.params.alpha = c.cpu == Activation::kHardSigmoid ? 1.0f / 6.0f : 0.7f;
    shape.axis = n;
    absl::StatusOr<std::unique_ptr<cpu::ActivationOp>> op =
        cpu::ActivationOp::Create(shape);
    ASSERT_TRUE(op.ok()) << op.status();
    std::vector<float> want_y(n), want_dx(n);
    ASSERT_TRUE((*op)->Forward(x.data(), want_y.data()).ok());
    ASSERT_TRUE(
        (*op)
            ->Backward(x.data(), want_y.data(), dy.data(), want_dx.data())
            .ok());
    PointwiseParams params;
    params.kind = c.gpu;
    params.max_value = shape.params.max_value;
    params.negative_slope = shape.params.negative_slope;
    params.threshold = shape.params.threshold;
    params.alpha = shape.params.alpha;
    const float* x_in = gpu.Upload(x);
    float* y = gpu.Allocate(n);
    float* dx = gpu.Allocate(n);
    ASSERT_EQ(LaunchPointwiseForward(params, x_in, n, y, gpu.stream()),
              cudaSuccess);
    ASSERT_EQ(LaunchPointwiseBackward(params, x_in, y, gpu.Upload(dy), n, dx,
                                      gpu.stream()),
              cudaSuccess);
    EXPECT_TRUE(Close(gpu.Download(y, n), want_y));
    EXPECT_TRUE(Close(gpu.Download(dx, n), want_dx));
  }
}

TEST(GraphKernels, PermuteAndItsInverseMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  ASSERT_TRUE(gpu.ok());
  std::unique_ptr<cpu::Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  for (const auto& [dims, order] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int>>>{
           {{3, 4, 2}, {1, 2, 0}},
           {{3, 4, 2}, {2, 0, 1}},
           {{2, 3, 4, 5}, {3, 1, 0, 2}}}) {
    cpu::PermuteShape shape;
    shape.batch = 2;
    shape.in_dims = dims;
    for (const int a : order) shape.dims.push_back(a + 1);
    absl::StatusOr<std::unique_ptr<cpu::PermuteOp>> op =
        cpu::PermuteOp::Create(shape, engine.get());
    ASSERT_TRUE(op.ok()) << op.status();
    int64_t per_example = 1;
    for (const int64_t d : dims) per_example *= d;
    const int64_t n = 2 * per_example;
    const std::vector<float> x = Random(n, 16);
    std::vector<float> want_y(n), want_dx(n);
    ASSERT_TRUE((*op)->Forward(x.data(), want_y.data()).ok());
    ASSERT_TRUE((*op)->Backward(x.data(), want_dx.data()).ok());
    float* y = gpu.Allocate(n);
    float* dx = gpu.Allocate(n);
    const float* x_in = gpu.Upload(x);
    // The geometries graph_stage.cc hands the kernel.
    ASSERT_EQ(
        LaunchPermute(x_in, 2, TransposeGeometry(dims, order), y, gpu.stream()),
        cudaSuccess);
    ASSERT_EQ(LaunchPermute(x_in, 2, InverseTransposeGeometry(dims, order), dx,
                            gpu.stream()),
              cudaSuccess);
    EXPECT_EQ(gpu.Download(y, n), want_y);
    EXPECT_EQ(gpu.Download(dx, n), want_dx);
  }
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
