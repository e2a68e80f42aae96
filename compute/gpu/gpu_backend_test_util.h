// Helpers of the GpuBackend-against-CpuBackend tests (gpu_backend_test.cc,
// gpu_backend_graph_test.cc): random batches laid out as model_input.h
// says, both backends made alike, and CompareTraining, which trains a few
// steps on both from the same weights and checks every gradient, the loss,
// the L2 penalty and the accuracy count of each step and of an evaluation.
// A MultiHeadAttention's key/bias gradient, 0 in exact arithmetic, is
// compared on the scale of its query/bias gradient (both sides are
// rounding noise there).
//
// Tolerance: each gradient's max_i |gpu_i - cpu_i| <= 1e-4 * max_i |cpu_i|
// (float32 with different summation orders); loss sums to 1e-4 relative;
// the accuracy count exactly (the inputs keep arg-max ties improbable). Both
// backends draw the same dropout masks (the same keys), so dropout models
// compare too.
#ifndef PSTRAIN_COMPUTE_GPU_GPU_BACKEND_TEST_UTIL_H_
#define PSTRAIN_COMPUTE_GPU_GPU_BACKEND_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_probe.h"
#include "common/tensor.h"
#include "compute/backend.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {
namespace gpu_test {

inline constexpr double kRelative = 1e-4;

// Skips the test, printing why, where there is no usable GPU.
#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    absl::StatusOr<int> count = CudaDeviceCount();                           \
    if (!count.ok()) {                                                       \
      GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message() \
                   << ")";                                                   \
    }                                                                        \
  } while (false)

inline bool HaveGpu() { return CudaDeviceCount().ok(); }

struct Batch {
  std::vector<float> features;
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;
};

// `n` random examples for `spec`: int32 ids when the model takes only ids,
// else floats (ids as exact floats in their columns); labels of its
// classes (0 or 1 for one output). A test failure (and no examples) for an
// input of ids without a vocabulary (a dynamic table's).
Batch RandomBatch(const ModelSpec& spec, int64_t n, uint32_t seed);

// A step's input over `batch`, as a second worker of three would see it.
StepInput InputOf(const Batch& batch, int64_t n, int64_t step);

// Whether `got` is within kRelative of `want`'s largest magnitude (or of
// min_scale, if larger).
::testing::AssertionResult Near(const Tensor& got, const Tensor& want,
                                double min_scale = 0);

struct Pair {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<Backend> gpu;
};

// Both backends for `spec` (GPU 0, one CPU thread), the same seed.
Pair MakePair(const ModelSpec& spec, LossKind loss,
              LossInput input = LossInput::kLogits);

// Trains `steps` steps of batch sizes `sizes` (cycled) on both backends
// from the same weights, comparing each step's results and gradients, and
// an evaluation after each; between steps, applies the CPU's gradients to
// the shared weights (plain SGD), so later steps see new weights.
void CompareTraining(const std::string& what, const ModelSpec& spec,
                     LossKind loss, const std::vector<int64_t>& sizes,
                     int steps, LossInput loss_input = LossInput::kLogits);

// The logits head of the graph models: Flatten `reads`, then Dense "out".
std::vector<std::string> Head(const std::string& reads, int classes = 3);

std::vector<std::string> Join(std::vector<std::string> a,
                              const std::vector<std::string>& b);

// CompareTraining of the Functional model `json` with sparse cross-entropy,
// batches of 6 then 1; with `mse`, a step of MSE too.
void CompareGraph(const std::string& what, const std::string& json,
                  bool mse = false);

}  // namespace gpu_test
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_GPU_BACKEND_TEST_UTIL_H_
