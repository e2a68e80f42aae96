// Speed of Conv2DOp forward and backward on the conv layers of a typical
// MNIST / Fashion-MNIST CNN, batch 64, with 1 and 2 oneDNN threads. Run:
//   bazel run --config=opt //compute/cpu:conv_bench
// The FLOPS counter counts 2 * multiply-adds of the direct convolution
// (backward: dx and dw, twice the forward's work).
#include <cstdlib>
#include <vector>

#include "benchmark/benchmark.h"
#include "compute/cpu/conv2d.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

Conv2DShape Layer(int index) {
  Conv2DShape s;
  s.batch = 64;
  s.kernel_h = s.kernel_w = 3;
  s.padding = Padding::kSame;
  if (index == 0) {  // 28x28x1 -> 32, the first layer: no dx.
    s.height = s.width = 28;
    s.in_channels = 1;
    s.out_channels = 32;
    s.compute_dx = false;
  } else {  // 14x14x32 -> 64, after a 2x2 pool.
    s.height = s.width = 14;
    s.in_channels = 32;
    s.out_channels = 64;
  }
  return s;
}

struct Setup {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Conv2DOp> conv;
  std::vector<float> x, w, b, y, dx, dw, db;
  double flops = 0;

  Setup(int threads, int layer) {
    EngineOptions options;
    options.num_threads = threads;
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(options);
    if (!e.ok()) std::abort();
    engine = std::move(*e);
    const Conv2DShape s = Layer(layer);
    absl::StatusOr<std::unique_ptr<Conv2DOp>> c =
        Conv2DOp::Create(s, engine.get());
    if (!c.ok()) std::abort();
    conv = std::move(*c);
    const int64_t out =
        s.batch * conv->out_height() * conv->out_width() * s.out_channels;
    x.assign(s.batch * s.height * s.width * s.in_channels, 0.5f);
    w.assign(s.kernel_h * s.kernel_w * s.in_channels * s.out_channels, 0.1f);
    b.assign(s.out_channels, 0.0f);
    y.assign(out, 0.0f);
    dx.assign(x.size(), 0.0f);
    dw.assign(w.size(), 0.0f);
    db.assign(b.size(), 0.0f);
    flops = 2.0 * out * s.kernel_h * s.kernel_w * s.in_channels;
  }
};

void BM_Conv2DForward(benchmark::State& state) {
  Setup setup(state.range(0), state.range(1));
  uint64_t step = 0;
  for (auto _ : state) {
    // A new weights step each iteration: includes the once-per-step reorder.
    if (!setup.conv
             ->Forward(setup.x.data(), setup.w.data(), ++step, setup.b.data(),
                       setup.y.data())
             .ok()) {
      state.SkipWithError("Forward failed");
    }
  }
  state.counters["FLOPS"] = benchmark::Counter(
      setup.flops, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Conv2DBackward(benchmark::State& state) {
  Setup setup(state.range(0), state.range(1));
  const bool dx = setup.conv->shape().compute_dx;
  uint64_t step = 0;
  for (auto _ : state) {
    if (!setup.conv
             ->Backward(setup.x.data(), setup.w.data(), ++step, setup.y.data(),
                        dx ? setup.dx.data() : nullptr, setup.dw.data(),
                        setup.db.data())
             .ok()) {
      state.SkipWithError("Backward failed");
    }
  }
  state.counters["FLOPS"] =
      benchmark::Counter(setup.flops * (dx ? 2 : 1),
                         benchmark::Counter::kIsIterationInvariantRate);
}

// Arguments: {threads, layer}.
BENCHMARK(BM_Conv2DForward)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_Conv2DBackward)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
