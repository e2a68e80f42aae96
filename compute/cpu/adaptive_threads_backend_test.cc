#include "compute/cpu/adaptive_threads_backend.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "compute/cpu/model_test_util.h"
#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Conv -> pool -> flatten -> dropout -> dense softmax.
std::string SmallCnn() {
  return KerasModel(
      "8, 8, 1",
      {KerasLayer("Conv2D", R"("name": "conv", "filters": 4,
             "kernel_size": 3, "padding": "same", "activation": "relu")"),
       KerasLayer("MaxPooling2D", R"("name": "pool", "pool_size": 2)"),
       KerasLayer("Flatten", R"("name": "flatten")"),
       KerasLayer("Dropout", R"("name": "dropout", "rate": 0.3)"),
       KerasLayer("Dense", R"("name": "dense", "units": 5,
             "activation": "softmax")")});
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.flat<float>().begin(), t.flat<float>().end());
}

// Whichever setting the tuner picks at each step (probes included: the
// first comes after ThreadCountTuner::kFirstProbe steps), every step
// computes what a one-thread CpuBackend computes.
TEST(AdaptiveThreadsBackend, EveryStepEqualsTheOneThreadBackend) {
  const ModelSpec spec = MustParse(SmallCnn());
  CpuBackendOptions options;
  options.num_threads = 2;
  options.run_seed = 7;
  absl::StatusOr<std::unique_ptr<Backend>> adaptive =
      CreateAdaptiveThreadsBackend(spec, options);
  ASSERT_TRUE(adaptive.ok()) << adaptive.status();
  options.num_threads = 1;
  absl::StatusOr<std::unique_ptr<Backend>> reference =
      CreateCpuBackend(spec, options);
  ASSERT_TRUE(reference.ok()) << reference.status();

  ModelVariables a = MakeVariables(spec, Init::kRandom, 3);
  ModelVariables b = MakeVariables(spec, Init::kRandom, 3);
  constexpr int kBatch = 16;
  for (int step = 0; step < 40; ++step) {
    const std::vector<float> x = RandomFloats(kBatch * 64, 100 + step);
    std::vector<int32_t> y(kBatch);
    for (int i = 0; i < kBatch; ++i) y[i] = (i * 7 + step) % 5;
    StepInput input;
    input.features = x.data();
    input.labels = y.data();
    input.batch = kBatch;
    input.step = step;
    input.weights_version = step;
    absl::StatusOr<StepResult> got =
        (*adaptive)->TrainStep(input, a.weight_map, &a.gradient_map);
    absl::StatusOr<StepResult> want =
        (*reference)->TrainStep(input, b.weight_map, &b.gradient_map);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_NEAR(got->loss_sum, want->loss_sum, 1e-5 * kBatch) << step;
    EXPECT_EQ(got->correct, want->correct) << step;
    for (size_t v = 0; v < a.gradients.size(); ++v) {
      EXPECT_LE(MaxRelativeDifference(Values(a.gradients[v]),
                                      Values(b.gradients[v])),
                1e-5)
          << "step " << step << ", " << spec.variables[v].name();
    }
    absl::StatusOr<StepResult> evaluated =
        (*adaptive)->Evaluate(input, a.weight_map);
    ASSERT_TRUE(evaluated.ok()) << evaluated.status();
    EXPECT_EQ(evaluated->examples, kBatch);
  }
}

TEST(AdaptiveThreadsBackend, RefusesWhatTheCpuBackendRefuses) {
  CpuBackendOptions options;
  options.num_threads = -1;
  EXPECT_EQ(CreateAdaptiveThreadsBackend(MustParse(SmallCnn()), options)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
