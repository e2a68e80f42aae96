// The GPU BatchNormalization, LayerNormalization and MultiHeadAttention ops
// against their CPU twins (compute/cpu, oneDNN) on the same seeded random
// inputs: every output and gradient, in every mode (training and inference,
// center/scale on and off, dx wanted or not; self and cross attention, with
// and without biases, causal, shared input-gradient buffers), for several
// shapes including odd sizes, one-element axes and rows longer than a block.
//
// Tolerance: max_i |gpu_i - cpu_i| <= 1e-4 * max_i |cpu_i| per tensor
// (float32 with different summation orders).
//
// Without a GPU every comparison skips, printing "skipped: no usable GPU
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
#include "compute/cpu/attention.h"
#include "compute/cpu/batch_norm.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/layer_norm.h"
#include "compute/gpu/attention.h"
#include "compute/gpu/batch_norm.h"
#include "compute/gpu/device.h"
#include "compute/gpu/layer_norm.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr double kRelative = 1e-4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 generator(seed);
  std::vector<float> values(n);
  for (float& v : values) {
    v = static_cast<float>(lo + (hi - lo) * (generator() / 4294967296.0));
  }
  return values;
}

// max_i |got_i - want_i| <= relative * max_i |want_i|; NaN in got (an
// element never written) fails.
::testing::AssertionResult Near(const std::vector<float>& got,
                                const std::vector<float>& want,
                                double relative = kRelative) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << want.size();
  }
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(double{w}));
  const double bound = relative * std::max(scale, 1e-30);
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(double{got[i]} - want[i]);
    if (!(error <= worst)) {
      worst =
          std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      worst_index = i;
    }
  }
  if (worst <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_index << " is " << got[worst_index]
         << ", the CPU's " << want[worst_index] << ": error " << worst << " > "
         << relative << " * max|cpu| " << scale;
}

// max_i |got_i| <= relative * scale: a result that is 0 in exact
// arithmetic, next to a related result of magnitude `scale`.
::testing::AssertionResult NearZero(const std::vector<float>& got, double scale,
                                    double relative = kRelative) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double{got[i]}) <= relative * scale)) {
      return ::testing::AssertionFailure()
             << "element " << i << " is " << got[i] << ", not 0 within "
             << relative << " * " << scale;
    }
  }
  return ::testing::AssertionSuccess();
}

class NormAttentionOpsTest : public ::testing::Test {
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
    cpu::EngineOptions options;
    options.num_threads = 1;
    absl::StatusOr<std::unique_ptr<cpu::Engine>> engine =
        cpu::Engine::Create(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  DeviceBuffer Upload(const std::vector<float>& host) {
    absl::StatusOr<DeviceBuffer> buffer =
        device_->Allocate(host.size() * sizeof(float));
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

  // Host and device copies of one tensor.
  struct Tensor {
    std::vector<float> host;
    DeviceBuffer device;
    float* cpu() { return host.empty() ? nullptr : host.data(); }
    float* gpu() const { return device.floats(); }
  };
  Tensor Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    Tensor t;
    t.host = RandomFloats(n, seed, lo, hi);
    t.device = Upload(t.host);
    return t;
  }
  // An output: NaN-filled on both sides (n == 0: none, null pointers).
  Tensor Out(int64_t n) {
    Tensor t;
    if (n == 0) return t;
    t.host.assign(n, kNaN);
    t.device = Output(n);
    return t;
  }

  std::unique_ptr<Device> device_;
  std::unique_ptr<cpu::Engine> engine_;
};

// ---------------------------------------------------------------------------
// BatchNormalization.

struct BatchNormCase {
  const char* name;
  int64_t rows, channels;
  bool center, scale;
  float offset;  // Added to x: large means test the statistics' precision.
};

TEST_F(NormAttentionOpsTest, BatchNormMatchesCpuInTrainingInferenceBackward) {
  const BatchNormCase cases[] = {
      {"tiny", 7, 3, true, true, 0.0f},
      {"one channel, no center or scale", 5, 1, false, false, 0.5f},
      {"center only", 1000, 5, true, false, 0.0f},
      {"scale only, 64 channels", 561, 64, false, true, -0.3f},
      {"one row", 1, 6, true, true, 0.0f},
      // A conv activation of batch 4 at 28x28 with mean 3: the float32 sums
      // the CPU op avoids would drift here.
      {"4x28x28 rows, mean 3", 4 * 28 * 28, 16, true, true, 3.0f},
      {"odd sizes, mean 100", 1237, 37, true, true, 100.0f},
  };
  for (const BatchNormCase& c : cases) {
    SCOPED_TRACE(c.name);
    BatchNormShape shape;
    shape.rows = c.rows;
    shape.channels = c.channels;
    shape.epsilon = 1e-3f;
    shape.center = c.center;
    shape.scale = c.scale;
    absl::StatusOr<std::unique_ptr<cpu::BatchNormOp>> cpu_op =
        cpu::BatchNormOp::Create(shape, engine_.get());
    ASSERT_TRUE(cpu_op.ok()) << cpu_op.status();
    absl::StatusOr<std::unique_ptr<BatchNormOp>> gpu_op =
        BatchNormOp::Create(shape, device_.get());
    ASSERT_TRUE(gpu_op.ok()) << gpu_op.status();
    const int64_t n = c.rows * c.channels;
    Tensor x = Random(n, 1, -1.0f + c.offset, 1.0f + c.offset);
    Tensor gamma = c.scale ? Random(c.channels, 2, 0.5f, 1.5f) : Tensor();
    Tensor beta = c.center ? Random(c.channels, 3) : Tensor();
    Tensor dy = Random(n, 4);

    // Training forward.
    Tensor y = Out(n), mean = Out(c.channels), var = Out(c.channels);
    ASSERT_TRUE((*cpu_op)
                    ->ForwardTraining(x.cpu(), gamma.cpu(), beta.cpu(), y.cpu(),
                                      mean.cpu(), var.cpu())
                    .ok());
    ASSERT_TRUE((*gpu_op)
                    ->ForwardTraining(x.gpu(), gamma.gpu(), beta.gpu(), y.gpu(),
                                      mean.gpu(), var.gpu())
                    .ok());
    EXPECT_TRUE(Near(Download(y.device), y.host)) << "y (training)";
    EXPECT_TRUE(Near(Download(mean.device), mean.host)) << "batch mean";
    EXPECT_TRUE(Near(Download(var.device), var.host)) << "batch variance";

    // The moving statistics' "gradients": the statistics times the batch.
    const float batch = 32;
    Tensor scaled_mean = Out(c.channels), scaled_var = Out(c.channels);
    ASSERT_TRUE(
        (*gpu_op)
            ->ScaledStatistics(batch, scaled_mean.gpu(), scaled_var.gpu())
            .ok());
    std::vector<float> want_mean = mean.host, want_var = var.host;
    for (float& v : want_mean) v *= batch;
    for (float& v : want_var) v *= batch;
    EXPECT_TRUE(Near(Download(scaled_mean.device), want_mean));
    EXPECT_TRUE(Near(Download(scaled_var.device), want_var));

    // Backward with dx, then without (parameters only).
    for (const bool with_dx : {true, false}) {
      SCOPED_TRACE(with_dx ? "with dx" : "without dx");
      Tensor dx = Out(with_dx ? n : 0);
      Tensor dgamma = Out(c.scale ? c.channels : 0);
      Tensor dbeta = Out(c.center ? c.channels : 0);
      ASSERT_TRUE((*cpu_op)
                      ->Backward(x.cpu(), gamma.cpu(), dy.cpu(), dx.cpu(),
                                 dgamma.cpu(), dbeta.cpu())
                      .ok());
      ASSERT_TRUE((*gpu_op)
                      ->Backward(x.gpu(), gamma.gpu(), dy.gpu(), dx.gpu(),
                                 dgamma.gpu(), dbeta.gpu())
                      .ok());
      if (with_dx) {
        EXPECT_TRUE(Near(Download(dx.device), dx.host)) << "dx";
      }
      if (c.scale) {
        EXPECT_TRUE(Near(Download(dgamma.device), dgamma.host)) << "dgamma";
      }
      if (c.center) {
        EXPECT_TRUE(Near(Download(dbeta.device), dbeta.host)) << "dbeta";
      }
    }

    // Inference with given moving statistics.
    Tensor moving_mean =
        Random(c.channels, 5, c.offset - 0.2f, c.offset + 0.2f);
    Tensor moving_var = Random(c.channels, 6, 0.1f, 2.0f);
    Tensor y_inference = Out(n);
    ASSERT_TRUE((*cpu_op)
                    ->ForwardInference(x.cpu(), gamma.cpu(), beta.cpu(),
                                       moving_mean.cpu(), moving_var.cpu(),
                                       y_inference.cpu())
                    .ok());
    ASSERT_TRUE((*gpu_op)
                    ->ForwardInference(x.gpu(), gamma.gpu(), beta.gpu(),
                                       moving_mean.gpu(), moving_var.gpu(),
                                       y_inference.gpu())
                    .ok());
    EXPECT_TRUE(Near(Download(y_inference.device), y_inference.host))
        << "y (inference)";
  }
}

TEST_F(NormAttentionOpsTest, BatchNormRefusesBackwardBeforeTrainingForward) {
  BatchNormShape shape;
  shape.rows = 4;
  shape.channels = 2;
  absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
      BatchNormOp::Create(shape, device_.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Tensor x = Random(8, 1), dy = Random(8, 2), gamma = Random(2, 3);
  Tensor dgamma = Out(2), dbeta = Out(2), scaled = Out(2);
  EXPECT_EQ((*op)
                ->Backward(x.gpu(), gamma.gpu(), dy.gpu(), nullptr,
                           dgamma.gpu(), dbeta.gpu())
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*op)->ScaledStatistics(2.0f, scaled.gpu(), nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  // Missing gamma with scale on.
  Tensor y = Out(8);
  const absl::Status status = (*op)->ForwardTraining(
      x.gpu(), nullptr, gamma.gpu(), y.gpu(), nullptr, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("gamma must be given iff scale"),
            std::string::npos)
      << status;
}

// ---------------------------------------------------------------------------
// LayerNormalization.

struct LayerNormCase {
  const char* name;
  int64_t rows, width;
  bool center, scale;
};

TEST_F(NormAttentionOpsTest, LayerNormMatchesCpuForwardAndBackward) {
  const LayerNormCase cases[] = {
      {"tiny", 5, 7, true, true},
      {"width 1", 9, 1, true, true},
      {"scale only, wide", 3, 1000, false, true},
      {"center only, odd", 130, 33, true, false},
      {"neither, width 300", 17, 300, false, false},
      {"transformer rows", 4 * 28, 64, true, true},
      {"width past a block (2048), one row", 1, 2048, true, true},
  };
  for (const LayerNormCase& c : cases) {
    SCOPED_TRACE(c.name);
    LayerNormShape shape;
    shape.rows = c.rows;
    shape.width = c.width;
    shape.epsilon = 1e-3f;
    shape.center = c.center;
    shape.scale = c.scale;
    absl::StatusOr<std::unique_ptr<cpu::LayerNormOp>> cpu_op =
        cpu::LayerNormOp::Create(shape, engine_.get());
    ASSERT_TRUE(cpu_op.ok()) << cpu_op.status();
    absl::StatusOr<std::unique_ptr<LayerNormOp>> gpu_op =
        LayerNormOp::Create(shape, device_.get());
    ASSERT_TRUE(gpu_op.ok()) << gpu_op.status();
    const int64_t n = c.rows * c.width;
    Tensor x = Random(n, 11, -0.5f, 1.5f);
    Tensor gamma = c.scale ? Random(c.width, 12, 0.5f, 1.5f) : Tensor();
    Tensor beta = c.center ? Random(c.width, 13) : Tensor();
    Tensor dy = Random(n, 14);

    Tensor y = Out(n);
    ASSERT_TRUE(
        (*cpu_op)->Forward(x.cpu(), gamma.cpu(), beta.cpu(), y.cpu()).ok());
    ASSERT_TRUE(
        (*gpu_op)->Forward(x.gpu(), gamma.gpu(), beta.gpu(), y.gpu()).ok());
    EXPECT_TRUE(Near(Download(y.device), y.host)) << "y";
    std::vector<float> mean(c.rows), variance(c.rows);
    ASSERT_TRUE(
        device_
            ->CopyToHost((*gpu_op)->mean(), c.rows * sizeof(float), mean.data())
            .ok());
    ASSERT_TRUE(device_
                    ->CopyToHost((*gpu_op)->variance(), c.rows * sizeof(float),
                                 variance.data())
                    .ok());
    EXPECT_TRUE(Near(mean, (*cpu_op)->mean())) << "mean";
    EXPECT_TRUE(Near(variance, (*cpu_op)->variance())) << "variance";

    for (const bool with_dx : {true, false}) {
      SCOPED_TRACE(with_dx ? "with dx" : "without dx");
      Tensor dx = Out(with_dx ? n : 0);
      Tensor dgamma = Out(c.scale ? c.width : 0);
      Tensor dbeta = Out(c.center ? c.width : 0);
      ASSERT_TRUE((*cpu_op)
                      ->Backward(x.cpu(), gamma.cpu(), dy.cpu(), dx.cpu(),
                                 dgamma.cpu(), dbeta.cpu())
                      .ok());
      ASSERT_TRUE((*gpu_op)
                      ->Backward(x.gpu(), gamma.gpu(), dy.gpu(), dx.gpu(),
                                 dgamma.gpu(), dbeta.gpu())
                      .ok());
      if (with_dx) {
        EXPECT_TRUE(Near(Download(dx.device), dx.host)) << "dx";
      }
      if (c.scale) {
        EXPECT_TRUE(Near(Download(dgamma.device), dgamma.host)) << "dgamma";
      }
      if (c.center) {
        EXPECT_TRUE(Near(Download(dbeta.device), dbeta.host)) << "dbeta";
      }
    }
  }
}

// ---------------------------------------------------------------------------
// MultiHeadAttention.

// How the inputs (and their gradients) are passed.
enum class Inputs {
  kSelf,          // query = key = value: one buffer, one gradient buffer.
  kKeyIsValue,    // Keras's default key: key = value, their gradients too.
  kAllSeparate,   // Three buffers, three gradient buffers.
  kNoInputGrads,  // Three buffers; only the variables' gradients.
};

struct AttentionCase {
  const char* name;
  int64_t batch, tq, tv, dq, dk, dv, heads, key_dim, value_dim, output_dim;
  bool use_bias, causal;
  Inputs inputs;
};

// The variables' sizes in AttentionWeights' order.
std::vector<int64_t> VariableSizes(const AttentionShape& s) {
  const int64_t hk = s.heads * s.key_dim, hv = s.heads * s.value_dim;
  return {s.dq * hk, hk, s.dk * hk,         hk,
          s.dv * hv, hv, hv * s.output_dim, s.output_dim};
}

TEST_F(NormAttentionOpsTest, AttentionMatchesCpuForwardAndBackward) {
  const AttentionCase cases[] = {
      {"self, bias", 2, 5, 5, 8, 8, 8, 2, 3, 0, 0, true, false, Inputs::kSelf},
      {"self, causal, no bias", 3, 6, 6, 4, 4, 4, 1, 5, 0, 0, false, true,
       Inputs::kSelf},
      {"cross, all sizes differ, causal", 3, 4, 7, 6, 5, 9, 3, 4, 2, 11, false,
       true, Inputs::kAllSeparate},
      {"cross, key is value, bias", 2, 3, 9, 5, 7, 7, 2, 6, 3, 4, true, false,
       Inputs::kKeyIsValue},
      {"causal, tq > tv", 2, 7, 3, 4, 4, 4, 2, 2, 0, 0, true, true,
       Inputs::kAllSeparate},
      {"no input gradients", 1, 5, 4, 3, 6, 2, 2, 3, 4, 5, true, false,
       Inputs::kNoInputGrads},
      {"transformer example (28 tokens, 4 heads of 16)", 4, 28, 28, 64, 64, 64,
       4, 16, 0, 0, true, false, Inputs::kSelf},
      {"long rows (tv 100), 8 heads, causal", 2, 100, 100, 32, 32, 32, 8, 8, 0,
       0, true, true, Inputs::kSelf},
  };
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(c.name);
    AttentionShape shape;
    shape.batch = c.batch;
    shape.tq = c.tq;
    shape.tv = c.tv;
    shape.dq = c.dq;
    shape.dk = c.dk;
    shape.dv = c.dv;
    shape.heads = c.heads;
    shape.key_dim = c.key_dim;
    shape.value_dim = c.value_dim;
    shape.output_dim = c.output_dim;
    shape.use_bias = c.use_bias;
    shape.causal = c.causal;
    absl::StatusOr<std::unique_ptr<cpu::AttentionOp>> cpu_op =
        cpu::AttentionOp::Create(shape, engine_.get());
    ASSERT_TRUE(cpu_op.ok()) << cpu_op.status();
    absl::StatusOr<std::unique_ptr<AttentionOp>> gpu_op =
        AttentionOp::Create(shape, device_.get());
    ASSERT_TRUE(gpu_op.ok()) << gpu_op.status();
    const AttentionShape& s = (*cpu_op)->shape();  // Defaults resolved.
    EXPECT_EQ((*gpu_op)->shape().value_dim, s.value_dim);
    EXPECT_EQ((*gpu_op)->shape().output_dim, s.output_dim);

    // Variables (biases only with use_bias) and their gradient buffers.
    const std::vector<int64_t> sizes = VariableSizes(s);
    std::vector<Tensor> vars, dvars;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool bias = i % 2 == 1;
      const bool present = !bias || s.use_bias;
      vars.push_back(present ? Random(sizes[i], 100 + i, -0.5f, 0.5f)
                             : Tensor());
      dvars.push_back(Out(present ? sizes[i] : 0));
    }
    auto weights = [&](bool gpu) {
      auto p = [&](int i) -> const float* {
        return gpu ? vars[i].gpu() : vars[i].cpu();
      };
      AttentionWeights w;
      w.query_kernel = p(0);
      w.query_bias = p(1);
      w.key_kernel = p(2);
      w.key_bias = p(3);
      w.value_kernel = p(4);
      w.value_bias = p(5);
      w.output_kernel = p(6);
      w.output_bias = p(7);
      return w;
    };

    // Inputs and their gradients as the case passes them.
    const bool self = c.inputs == Inputs::kSelf;
    const bool key_is_value = c.inputs == Inputs::kKeyIsValue;
    Tensor query = Random(s.batch * s.tq * s.dq, 1);
    Tensor value = self ? Tensor() : Random(s.batch * s.tv * s.dv, 2);
    Tensor key =
        self || key_is_value ? Tensor() : Random(s.batch * s.tv * s.dk, 3);
    Tensor& value_in = self ? query : value;
    Tensor& key_in = self ? query : key_is_value ? value : key;
    const bool input_grads = c.inputs != Inputs::kNoInputGrads;
    Tensor d_query = Out(input_grads ? query.host.size() : 0);
    Tensor d_value = Out(input_grads && !self ? value.host.size() : 0);
    Tensor d_key =
        Out(input_grads && !self && !key_is_value ? key.host.size() : 0);
    Tensor& d_value_out = self ? d_query : d_value;
    Tensor& d_key_out = self ? d_query : key_is_value ? d_value : d_key;
    auto gradients = [&](bool gpu) {
      auto p = [&](Tensor& t) { return gpu ? t.gpu() : t.cpu(); };
      AttentionGradients g;
      g.query_kernel = p(dvars[0]);
      g.query_bias = p(dvars[1]);
      g.key_kernel = p(dvars[2]);
      g.key_bias = p(dvars[3]);
      g.value_kernel = p(dvars[4]);
      g.value_bias = p(dvars[5]);
      g.output_kernel = p(dvars[6]);
      g.output_bias = p(dvars[7]);
      g.query = p(d_query);
      g.value = p(d_value_out);
      g.key = p(d_key_out);
      return g;
    };

    Tensor y = Out(s.batch * s.tq * s.output_dim);
    Tensor dy = Random(y.host.size(), 4);
    ASSERT_TRUE((*cpu_op)
                    ->Forward(query.cpu(), key_in.cpu(), value_in.cpu(),
                              weights(false), y.cpu())
                    .ok());
    ASSERT_TRUE((*gpu_op)
                    ->Forward(query.gpu(), key_in.gpu(), value_in.gpu(),
                              weights(true), y.gpu())
                    .ok());
    EXPECT_TRUE(Near(Download(y.device), y.host)) << "y";
    const int64_t scores = s.batch * s.heads * s.tq * s.tv;
    std::vector<float> probs(scores);
    ASSERT_TRUE(device_
                    ->CopyToHost((*gpu_op)->probabilities(),
                                 scores * sizeof(float), probs.data())
                    .ok());
    const float* cpu_probs = (*cpu_op)->probabilities();
    EXPECT_TRUE(Near(probs, std::vector<float>(cpu_probs, cpu_probs + scores)))
        << "probabilities";
    if (s.causal) {  // Masked positions exactly 0.
      for (int64_t row = 0; row < s.batch * s.heads * s.tq; ++row) {
        for (int64_t j = row % s.tq + 1; j < s.tv; ++j) {
          ASSERT_EQ(probs[row * s.tv + j], 0.0f) << "row " << row << " j " << j;
        }
      }
    }

    ASSERT_TRUE((*cpu_op)
                    ->Backward(query.cpu(), key_in.cpu(), value_in.cpu(),
                               weights(false), dy.cpu(), gradients(false))
                    .ok());
    const absl::Status status =
        (*gpu_op)->Backward(query.gpu(), key_in.gpu(), value_in.gpu(),
                            weights(true), dy.gpu(), gradients(true));
    ASSERT_TRUE(status.ok()) << status;
    const char* names[] = {"query/kernel",
                           "query/bias",
                           "key/kernel",
                           "key/bias",
                           "value/kernel",
                           "value/bias",
                           "attention_output/kernel",
                           "attention_output/bias"};
    for (size_t i = 0; i < dvars.size(); ++i) {
      if (dvars[i].host.empty() || i == 3) continue;
      EXPECT_TRUE(Near(Download(dvars[i].device), dvars[i].host))
          << "d " << names[i];
    }
    if (s.use_bias) {
      // key/bias shifts every score of a query row by the same amount, which
      // the softmax ignores: its gradient is exactly 0, and both ops give
      // rounding noise. Checked to be 0 on the scale of query/bias's.
      double scale = 0;
      for (float v : dvars[1].host)
        scale = std::max(scale, std::fabs(double{v}));
      EXPECT_TRUE(NearZero(Download(dvars[3].device), scale)) << "d key/bias";
    }
    for (Tensor* t : {&d_query, &d_key, &d_value}) {
      if (t->host.empty()) continue;
      EXPECT_TRUE(Near(Download(t->device), t->host))
          << "input gradient "
          << (t == &d_query ? "query"
              : t == &d_key ? "key"
                            : "value");
    }
  }
}

// ---------------------------------------------------------------------------
// Argument checks: no GPU needed (the device is checked last).

TEST(NormAttentionOpArguments, BadShapesAreRefusedBeforeAnyGpuWork) {
  BatchNormShape bn;
  bn.rows = 0;
  bn.channels = 3;
  absl::Status status = BatchNormOp::Create(bn, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("rows"), std::string::npos) << status;
  bn.rows = 4;
  bn.epsilon = -1.0f;
  status = BatchNormOp::Create(bn, nullptr).status();
  EXPECT_NE(status.message().find("epsilon"), std::string::npos) << status;
  bn.epsilon = 1e-3f;
  status = BatchNormOp::Create(bn, nullptr).status();
  EXPECT_NE(status.message().find("device is required"), std::string::npos)
      << status;

  LayerNormShape ln;
  ln.rows = 2;
  ln.width = int64_t{1} << 40;
  status = LayerNormOp::Create(ln, nullptr).status();
  EXPECT_NE(status.message().find("width must be in"), std::string::npos)
      << status;
  ln.width = 3;
  ln.epsilon = std::numeric_limits<float>::infinity();
  status = LayerNormOp::Create(ln, nullptr).status();
  EXPECT_NE(status.message().find("epsilon"), std::string::npos) << status;

  AttentionShape mha;
  mha.batch = 2;
  mha.tq = mha.tv = 3;
  mha.dq = mha.dk = mha.dv = 4;
  mha.heads = 2;
  mha.key_dim = 0;
  status = AttentionOp::Create(mha, nullptr).status();
  EXPECT_NE(status.message().find("key_dim"), std::string::npos) << status;
  mha.key_dim = 2;
  mha.dropout = 0.1;
  status = AttentionOp::Create(mha, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  mha.dropout = 0;
  mha.batch = 1 << 20;
  mha.tq = mha.tv = 1 << 10;  // Scores [B, H, Tq, Tv] beyond cuBLAS's int.
  status = AttentionOp::Create(mha, nullptr).status();
  EXPECT_NE(status.message().find("more than"), std::string::npos) << status;
  mha.batch = 2;
  mha.tq = mha.tv = 3;
  status = AttentionOp::Create(mha, nullptr).status();
  EXPECT_NE(status.message().find("device is required"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
