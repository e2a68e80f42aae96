// gpu::Losses' categorical, binary, mae and Huber losses and binary accuracy
// against compute/cpu/losses.h on the same seeded inputs: the loss sum to
// 1e-9 relative (both add per-example doubles, in different orders), the
// gradient to 1e-6 relative to its largest element (the GPU's exp and log
// may differ from glibc's by an ulp), counts exactly; bad labels as
// INVALID_ARGUMENT naming the example. (The sparse losses, mse and
// CountCorrect are in gpu_ops_cuda_test.)
//
// Without a GPU every test skips, printing "skipped: no usable GPU
// (<reason>)".
#include "compute/gpu/losses.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_probe.h"
#include "compute/cpu/losses.h"
#include "compute/gpu/device.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr double kLossRelative = 1e-9;
constexpr double kGradientRelative = 1e-6;
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

std::vector<int32_t> RandomLabels(int64_t n, int64_t classes, uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<int32_t> labels(n);
  for (int32_t& label : labels) label = generator() % classes;
  return labels;
}

// Soft target rows with some zeros; every other row one-hot.
std::vector<float> Targets(int64_t batch, int64_t classes, uint32_t seed) {
  std::vector<float> targets = RandomFloats(batch * classes, seed, -0.5f, 1);
  for (float& t : targets) t = t < 0 ? 0.0f : t;
  const std::vector<int32_t> labels = RandomLabels(batch, classes, seed + 1);
  for (int64_t i = 0; i < batch; i += 2) {
    for (int64_t j = 0; j < classes; ++j) {
      targets[i * classes + j] = j == labels[i] ? 1.0f : 0.0f;
    }
  }
  return targets;
}

::testing::AssertionResult Near(const std::vector<float>& got,
                                const std::vector<float>& want,
                                double relative) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << want.size();
  }
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(double{w}));
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(double{got[i]} - want[i]);
    if (!(error <= relative * scale)) {  // NaN (never written) fails too.
      return ::testing::AssertionFailure()
             << "element " << i << " is " << got[i] << ", the CPU's " << want[i]
             << " (max|cpu| " << scale << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

class GpuLossesTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMaxBatch = 300;

  void SetUp() override {
    absl::StatusOr<int> count = CudaDeviceCount();
    if (!count.ok()) {
      GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message()
                   << ")";
    }
    absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    absl::StatusOr<std::unique_ptr<Losses>> losses =
        Losses::Create(kMaxBatch, device_.get());
    ASSERT_TRUE(losses.ok()) << losses.status();
    losses_ = std::move(*losses);
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

  std::vector<float> Download(const DeviceBuffer& buffer) {
    std::vector<float> host(buffer.bytes() / sizeof(float), kNaN);
    const absl::Status status =
        device_->CopyToHost(buffer.data(), buffer.bytes(), host.data());
    EXPECT_TRUE(status.ok()) << status;
    return host;
  }

  // Runs a loss on the GPU and its CPU twin on (input, second) and compares
  // sums and gradients; then the GPU loss without a gradient.
  using GpuLoss = std::function<absl::StatusOr<double>(
      const float* input, const void* second, float* grad)>;
  using CpuLoss = std::function<absl::StatusOr<double>(
      const float* input, const void* second, float* grad)>;
  template <typename T>
  void Compare(const std::vector<float>& input, const std::vector<T>& second,
               const GpuLoss& gpu, const CpuLoss& cpu) {
    std::vector<float> cpu_grad(input.size(), kNaN);
    absl::StatusOr<double> want =
        cpu(input.data(), second.data(), cpu_grad.data());
    ASSERT_TRUE(want.ok()) << want.status();
    DeviceBuffer input_d = Upload(input), second_d = Upload(second);
    DeviceBuffer grad_d = Upload(std::vector<float>(input.size(), kNaN));
    absl::StatusOr<double> got =
        gpu(input_d.floats(), second_d.data(), grad_d.floats());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, *want, kLossRelative * std::fabs(*want));
    EXPECT_TRUE(Near(Download(grad_d), cpu_grad, kGradientRelative));
    absl::StatusOr<double> no_grad =
        gpu(input_d.floats(), second_d.data(), nullptr);
    ASSERT_TRUE(no_grad.ok()) << no_grad.status();
    EXPECT_EQ(*no_grad, *got);
  }

  std::unique_ptr<Device> device_;
  std::unique_ptr<Losses> losses_;
};

TEST_F(GpuLossesTest, CategoricalCrossEntropiesMatchCpu) {
  for (const auto& size :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 10}, {300, 33}}) {
    const int64_t batch = size.first, classes = size.second;
    SCOPED_TRACE(testing::Message() << batch << " x " << classes);
    const std::vector<float> targets = Targets(batch, classes, 1);
    Compare(
        RandomFloats(batch * classes, 2, -8, 8), targets,
        [&](const float* x, const void* t, float* g) {
          return losses_->SoftmaxCrossEntropyFromLogits(
              x, static_cast<const float*>(t), batch, classes, g);
        },
        [&](const float* x, const void* t, float* g) {
          return cpu::SoftmaxCrossEntropyFromLogits(
              x, static_cast<const float*>(t), batch, classes, g);
        });
    std::vector<float> probs = RandomFloats(batch * classes, 3, 0, 1);
    probs[0] = 1e-9f;  // Clipped.
    Compare(
        probs, targets,
        [&](const float* x, const void* t, float* g) {
          return losses_->CategoricalCrossEntropyFromProbabilities(
              x, static_cast<const float*>(t), batch, classes, g);
        },
        [&](const float* x, const void* t, float* g) {
          return cpu::CategoricalCrossEntropyFromProbabilities(
              x, static_cast<const float*>(t), batch, classes, g);
        });
  }
}

TEST_F(GpuLossesTest, BinaryCrossEntropiesAndAccuracyMatchCpu) {
  for (const int64_t batch : {1, 31, 300}) {
    SCOPED_TRACE(testing::Message() << "batch " << batch);
    const std::vector<int32_t> labels = RandomLabels(batch, 2, 4);
    const std::vector<float> logits = RandomFloats(batch, 5, -20, 20);
    Compare(
        logits, labels,
        [&](const float* x, const void* y, float* g) {
          return losses_->SigmoidCrossEntropyFromLogits(
              x, static_cast<const int32_t*>(y), batch, g);
        },
        [&](const float* x, const void* y, float* g) {
          return cpu::SigmoidCrossEntropyFromLogits(
              x, static_cast<const int32_t*>(y), batch, g);
        });
    std::vector<float> probs = RandomFloats(batch, 6, 0, 1);
    probs[0] = 1.0f;  // Clipped.
    Compare(
        probs, labels,
        [&](const float* x, const void* y, float* g) {
          return losses_->BinaryCrossEntropyFromProbabilities(
              x, static_cast<const int32_t*>(y), batch, g);
        },
        [&](const float* x, const void* y, float* g) {
          return cpu::BinaryCrossEntropyFromProbabilities(
              x, static_cast<const int32_t*>(y), batch, g);
        });
    DeviceBuffer labels_d = Upload(labels);
    for (const bool from_logits : {true, false}) {
      const std::vector<float>& scores = from_logits ? logits : probs;
      absl::StatusOr<int64_t> want = cpu::CountBinaryCorrect(
          scores.data(), from_logits, labels.data(), batch);
      ASSERT_TRUE(want.ok()) << want.status();
      DeviceBuffer scores_d = Upload(scores);
      absl::StatusOr<int64_t> got = losses_->CountBinaryCorrect(
          scores_d.floats(), from_logits, labels_d.as<int32_t>(), batch);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, *want);
    }
  }
}

TEST_F(GpuLossesTest, AbsoluteErrorAndHuberMatchCpu) {
  for (const auto& size :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {9, 4}, {300, 17}}) {
    const int64_t batch = size.first, outputs = size.second;
    SCOPED_TRACE(testing::Message() << batch << " x " << outputs);
    const std::vector<float> predictions =
        RandomFloats(batch * outputs, 7, -3, 3);
    const std::vector<float> targets = RandomFloats(batch * outputs, 8, -3, 3);
    Compare(
        predictions, targets,
        [&](const float* x, const void* t, float* g) {
          return losses_->MeanAbsoluteErrorSum(x, static_cast<const float*>(t),
                                               batch, outputs, g);
        },
        [&](const float* x, const void* t, float* g) {
          return cpu::MeanAbsoluteErrorSum(x, static_cast<const float*>(t),
                                           batch, outputs, g);
        });
    for (const float delta : {cpu::kHuberDelta, 0.3f}) {
      Compare(
          predictions, targets,
          [&](const float* x, const void* t, float* g) {
            return losses_->HuberSum(x, static_cast<const float*>(t), batch,
                                     outputs, delta, g);
          },
          [&](const float* x, const void* t, float* g) {
            return cpu::HuberSum(x, static_cast<const float*>(t), batch,
                                 outputs, delta, g);
          });
    }
  }
}

TEST_F(GpuLossesTest, BinaryLabelsOtherThanZeroOrOneAreRefusedByExample) {
  const std::vector<int32_t> labels = {0, 1, 1, 2, 0, -1};
  DeviceBuffer labels_d = Upload(labels);
  DeviceBuffer scores_d = Upload(RandomFloats(labels.size(), 9, 0, 1));
  const int64_t n = labels.size();
  const int32_t* y = labels_d.as<int32_t>();
  for (const absl::Status& status :
       {losses_->SigmoidCrossEntropyFromLogits(scores_d.floats(), y, n, nullptr)
            .status(),
        losses_
            ->BinaryCrossEntropyFromProbabilities(scores_d.floats(), y, n,
                                                  nullptr)
            .status(),
        losses_->CountBinaryCorrect(scores_d.floats(), false, y, n).status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("label 2 of example 3 is not 0 or 1"),
              std::string::npos)
        << status;
  }
}

TEST_F(GpuLossesTest, HuberRefusesADeltaThatIsNotPositive) {
  DeviceBuffer x = Upload(std::vector<float>(4, 1.0f));
  for (const float delta : {0.0f, -1.0f, kNaN}) {
    const absl::Status status =
        losses_->HuberSum(x.floats(), x.floats(), 2, 2, delta, nullptr)
            .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("delta must be > 0"), std::string::npos)
        << status;
  }
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
