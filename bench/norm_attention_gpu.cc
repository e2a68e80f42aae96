// Times the GPU BatchNormalization, LayerNormalization and MultiHeadAttention
// ops (compute/gpu), forward plus backward with every gradient, at the shapes
// of the shipped examples at a GPU-sized batch; bench/norm_attention_torch.py
// times PyTorch's (cuDNN) twins on the same shapes, in FP32 without TF32:
//
//   bazel build --config=opt //bench:norm_attention_gpu
//   bazel-bin/bench/norm_attention_gpu [--batch 256] [--iterations 200]
//   python3 bench/norm_attention_torch.py [--batch 256]
//
// Each line: the op, its shape, and the median over 5 runs of the mean time
// of `iterations` forward+backward calls enqueued back to back (CUDA
// events on the device's stream, after a warm-up).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/gpu/attention.h"
#include "compute/gpu/batch_norm.h"
#include "compute/gpu/device.h"
#include "compute/gpu/layer_norm.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

class Bench {
 public:
  explicit Bench(Device* device) : device_(device) {}

  // A device buffer of n uniform floats in [lo, hi).
  absl::StatusOr<float*> Random(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> host(n);
    std::uniform_real_distribution<float> uniform(lo, hi);
    for (float& v : host) v = uniform(generator_);
    PSTRAIN_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                             device_->Allocate(n * sizeof(float)));
    PSTRAIN_RETURN_IF_ERROR(
        device_->CopyToDevice(host.data(), buffer.bytes(), buffer.data()));
    buffers_.push_back(std::move(buffer));
    return buffers_.back().floats();
  }

  // The median over 5 runs of the mean milliseconds of one step().
  absl::StatusOr<double> Time(int iterations,
                              const std::function<absl::Status()>& step) {
    for (int i = 0; i < 10; ++i) PSTRAIN_RETURN_IF_ERROR(step());
    PSTRAIN_RETURN_IF_ERROR(device_->Synchronize());
    cudaEvent_t start, stop;
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&start), "event"));
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&stop), "event"));
    std::vector<double> runs;
    absl::Status status;
    for (int run = 0; run < 5 && status.ok(); ++run) {
      status = CudaStatus(cudaEventRecord(start, device_->stream()), "record");
      for (int i = 0; i < iterations && status.ok(); ++i) status = step();
      if (status.ok()) {
        status = CudaStatus(cudaEventRecord(stop, device_->stream()), "record");
      }
      if (status.ok()) {
        status = CudaStatus(cudaEventSynchronize(stop), "synchronize");
      }
      float ms = 0;
      if (status.ok()) {
        status = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "elapsed");
      }
      runs.push_back(ms / iterations);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    PSTRAIN_RETURN_IF_ERROR(status);
    std::sort(runs.begin(), runs.end());
    return runs[runs.size() / 2];
  }

 private:
  Device* const device_;
  std::mt19937 generator_{1};
  std::vector<DeviceBuffer> buffers_;
};

absl::Status Run(int64_t batch, int iterations) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice(0));
  Bench bench(device.get());

  // examples/resnet_small: BatchNormalization after a 32-filter conv at
  // 28x28.
  {
    BatchNormShape s;
    s.rows = batch * 28 * 28;
    s.channels = 32;
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchNormOp> op,
                             BatchNormOp::Create(s, device.get()));
    const int64_t n = s.rows * s.channels;
    PSTRAIN_ASSIGN_OR_RETURN(float* x, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* y, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* dy, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* dx, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* params, bench.Random(4 * s.channels));
    float* gamma = params;
    float* beta = params + s.channels;
    float* dgamma = params + 2 * s.channels;
    float* dbeta = params + 3 * s.channels;
    PSTRAIN_ASSIGN_OR_RETURN(double ms, bench.Time(iterations, [&] {
      PSTRAIN_RETURN_IF_ERROR(
          op->ForwardTraining(x, gamma, beta, y, nullptr, nullptr));
      return op->Backward(x, gamma, dy, dx, dgamma, dbeta);
    }));
    std::printf("BatchNormalization [%ld, %ld] training fwd+bwd: %.4f ms\n",
                static_cast<long>(s.rows), static_cast<long>(s.channels), ms);
  }

  // examples/transformer: LayerNormalization over 64 features of 28 tokens.
  {
    LayerNormShape s;
    s.rows = batch * 28;
    s.width = 64;
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LayerNormOp> op,
                             LayerNormOp::Create(s, device.get()));
    const int64_t n = s.rows * s.width;
    PSTRAIN_ASSIGN_OR_RETURN(float* x, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* y, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* dy, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* dx, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* params, bench.Random(4 * s.width));
    float* gamma = params;
    float* beta = params + s.width;
    float* dgamma = params + 2 * s.width;
    float* dbeta = params + 3 * s.width;
    PSTRAIN_ASSIGN_OR_RETURN(double ms, bench.Time(iterations, [&] {
      PSTRAIN_RETURN_IF_ERROR(op->Forward(x, gamma, beta, y));
      return op->Backward(x, gamma, dy, dx, dgamma, dbeta);
    }));
    std::printf("LayerNormalization [%ld, %ld] fwd+bwd: %.4f ms\n",
                static_cast<long>(s.rows), static_cast<long>(s.width), ms);
  }

  // examples/transformer: self-attention, 4 heads of 16 over 28 tokens of
  // 64 features.
  {
    AttentionShape s;
    s.batch = batch;
    s.tq = s.tv = 28;
    s.dq = s.dk = s.dv = 64;
    s.heads = 4;
    s.key_dim = 16;
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AttentionOp> op,
                             AttentionOp::Create(s, device.get()));
    const int64_t n = batch * 28 * 64;
    PSTRAIN_ASSIGN_OR_RETURN(float* x, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* y, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* dy, bench.Random(n));
    PSTRAIN_ASSIGN_OR_RETURN(float* dx, bench.Random(n));
    AttentionWeights w;
    AttentionGradients g;
    const int64_t kernel = 64 * 64, bias = 64;
    for (auto [weight, gradient, size] :
         {std::make_tuple(&w.query_kernel, &g.query_kernel, kernel),
          std::make_tuple(&w.query_bias, &g.query_bias, bias),
          std::make_tuple(&w.key_kernel, &g.key_kernel, kernel),
          std::make_tuple(&w.key_bias, &g.key_bias, bias),
          std::make_tuple(&w.value_kernel, &g.value_kernel, kernel),
          std::make_tuple(&w.value_bias, &g.value_bias, bias),
          std::make_tuple(&w.output_kernel, &g.output_kernel, kernel),
          std::make_tuple(&w.output_bias, &g.output_bias, bias)}) {
      PSTRAIN_ASSIGN_OR_RETURN(*weight, bench.Random(size, -0.2f, 0.2f));
      PSTRAIN_ASSIGN_OR_RETURN(*gradient, bench.Random(size));
    }
    g.query = g.key = g.value = dx;
    PSTRAIN_ASSIGN_OR_RETURN(double ms, bench.Time(iterations, [&] {
      PSTRAIN_RETURN_IF_ERROR(op->Forward(x, x, x, w, y));
      return op->Backward(x, x, x, w, dy, g);
    }));
    std::printf(
        "MultiHeadAttention self [%ld, 28, 64], 4 heads of 16, fwd+bwd: "
        "%.4f ms\n",
        static_cast<long>(batch), ms);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

int main(int argc, char** argv) {
  int64_t batch = 256;
  int iterations = 200;
  if ((argc - 1) % 2 != 0) {
    std::fprintf(stderr, "usage: %s [--batch N] [--iterations N]\n", argv[0]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batch") == 0) {
      batch = std::atol(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--iterations") == 0) {
      iterations = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--batch N] [--iterations N]\n", argv[0]);
      return 2;
    }
  }
  if (batch <= 0 || iterations <= 0) {
    std::fprintf(stderr, "--batch and --iterations must be positive\n");
    return 2;
  }
  const absl::Status status = pstrain::worker::gpu::Run(batch, iterations);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
