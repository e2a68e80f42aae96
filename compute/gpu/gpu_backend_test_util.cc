#include "compute/gpu/gpu_backend_test_util.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/model_test_util.h"
#include "compute/gpu/gpu_backend.h"
#include "data/model_input.h"

namespace pstrain {
namespace worker {
namespace gpu_test {

using cpu::GraphDense;
using cpu::GraphLayer;
using cpu::Init;
using cpu::MakeVariables;
using cpu::ModelVariables;
using cpu::MustParse;

// Rows as model_input.h lays them out: int32 ids when the model takes only
// ids, else floats (ids as exact floats in their columns).
Batch RandomBatch(const ModelSpec& spec, int64_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  Batch batch;
  const bool all_ids = ModelFeedDtype(spec) == DT_INT32;
  for (const InputColumns& c : ModelInputColumns(spec)) {
    if (c.ids && c.vocabulary <= 0) {
      ADD_FAILURE() << "an input of ids without a vocabulary (a dynamic "
                       "table's, input_dim 0): the worker remaps its ids "
                       "before the backend";
      return batch;
    }
  }
  for (int64_t b = 0; b < n; ++b) {
    for (const InputColumns& c : ModelInputColumns(spec)) {
      for (int64_t j = 0; j < c.count; ++j) {
        if (all_ids) {
          batch.ids.push_back(generator() % c.vocabulary);
        } else if (c.ids) {
          batch.features.push_back(
              static_cast<float>(generator() % c.vocabulary));
        } else {
          batch.features.push_back(generator() / 4294967296.0f - 0.5f);
        }
      }
    }
  }
  const int64_t classes = spec.output_shape[0];
  for (int64_t i = 0; i < n; ++i) {
    // One output: 0 or 1 (binary cross-entropy's labels, values for mse).
    batch.labels.push_back(classes == 1 ? generator() % 2
                                        : generator() % classes);
  }
  return batch;
}

StepInput InputOf(const Batch& batch, int64_t n, int64_t step) {
  StepInput input;
  input.features = batch.ids.empty()
                       ? static_cast<const void*>(batch.features.data())
                       : static_cast<const void*>(batch.ids.data());
  input.labels = batch.labels.data();
  input.batch = n;
  input.step = step;
  input.example_offset = 3 * n;  // As a second worker of three would.
  input.weights_version = static_cast<uint64_t>(step + 1);
  return input;
}

namespace {

double MaxMagnitude(const Tensor& t) {
  double m = 0;
  for (const float v : t.flat<float>()) m = std::max(m, std::fabs(double{v}));
  return m;
}

// Some gradients are 0 in exact arithmetic, and both backends compute
// rounding noise there: a MultiHeadAttention's key/bias (it shifts every
// score of a query's row alike, which the softmax ignores) and the bias of
// a layer read only by a BatchNormalization (which subtracts every per-
// channel constant). So each variable is compared on the scale of the
// largest gradient of its layer (the name up to the first '/'; trained
// variables and moving statistics apart), not only its own: noise in one
// variable is held to the precision of its layer's others.
double ScaleFloor(const ModelSpec& spec, const ModelVariables& cpu_vars,
                  size_t v) {
  const std::string& name = spec.variables[v].name();
  const std::string layer = name.substr(0, name.find('/'));
  double floor = 0;
  for (size_t i = 0; i < spec.variables.size(); ++i) {
    const std::string& other = spec.variables[i].name();
    if (other.compare(0, layer.size() + 1, layer + "/") == 0 &&
        spec.variables[i].has_moving_average() ==
            spec.variables[v].has_moving_average()) {
      floor = std::max(floor, MaxMagnitude(cpu_vars.gradients[i]));
    }
  }
  return floor;
}

}  // namespace

::testing::AssertionResult Near(const Tensor& got, const Tensor& want,
                                double min_scale) {
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double scale = min_scale, worst = 0;
  int64_t worst_index = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
    const double error = std::fabs(static_cast<double>(g[i]) - w[i]);
    if (!(error <= worst)) {  // NaN counts as the worst.
      worst = std::isnan(error) ? INFINITY : error;
      worst_index = i;
    }
  }
  if (worst <= kRelative * std::max(scale, 1e-30)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "element " << worst_index << ": GPU " << g[worst_index] << ", CPU "
         << w[worst_index] << " (error " << worst << ", max |CPU| " << scale
         << ")";
}

Pair MakePair(const ModelSpec& spec, LossKind loss,
              LossInput input) {
  CpuBackendOptions cpu_options;
  cpu_options.num_threads = 1;
  cpu_options.run_seed = 7;
  cpu_options.replica = 1;
  cpu_options.loss = loss;
  cpu_options.loss_input = input;
  GpuBackendOptions gpu_options;
  gpu_options.devices = {0};
  gpu_options.run_seed = 7;
  gpu_options.replica = 1;
  gpu_options.loss = loss;
  gpu_options.loss_input = input;
  Pair pair;
  absl::StatusOr<std::unique_ptr<Backend>> cpu =
      CreateCpuBackend(spec, cpu_options);
  absl::StatusOr<std::unique_ptr<Backend>> gpu =
      CreateGpuBackend(spec, gpu_options);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (cpu.ok()) pair.cpu = std::move(*cpu);
  if (gpu.ok()) pair.gpu = std::move(*gpu);
  return pair;
}

// Trains `steps` steps of batch sizes `sizes` (cycled) on both backends from
// the same weights, comparing each step's results and gradients; between
// steps, applies the CPU's gradients to the shared weights (plain SGD), so
// later steps see new weights (and a new weights_version).
void CompareTraining(const std::string& what, const ModelSpec& spec,
                     LossKind loss, const std::vector<int64_t>& sizes,
                     int steps, LossInput loss_input) {
  SCOPED_TRACE(what);
  Pair pair = MakePair(spec, loss, loss_input);
  ASSERT_NE(pair.cpu, nullptr);
  ASSERT_NE(pair.gpu, nullptr);
  ModelVariables cpu_vars = MakeVariables(spec, Init::kKeras, 3);
  ModelVariables gpu_vars = MakeVariables(spec, Init::kKeras, 3);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const int64_t n = sizes[step % sizes.size()];
    const Batch batch = RandomBatch(spec, std::max<int64_t>(n, 1), 100 + step);
    const StepInput input = InputOf(batch, n, step);
    absl::StatusOr<StepResult> want =
        pair.cpu->TrainStep(input, cpu_vars.weight_map, &cpu_vars.gradient_map);
    absl::StatusOr<StepResult> got =
        pair.gpu->TrainStep(input, cpu_vars.weight_map, &gpu_vars.gradient_map);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->examples, want->examples);
    EXPECT_EQ(got->correct, want->correct);
    EXPECT_NEAR(got->loss_sum, want->loss_sum,
                kRelative * std::max(1.0, std::fabs(want->loss_sum)));
    EXPECT_NEAR(got->l2_loss, want->l2_loss,
                kRelative * std::max(1e-6, std::fabs(want->l2_loss)));
    for (size_t v = 0; v < spec.variables.size(); ++v) {
      EXPECT_TRUE(Near(gpu_vars.gradients[v], cpu_vars.gradients[v],
                       ScaleFloor(spec, cpu_vars, v)))
          << spec.variables[v].name();
    }
    for (size_t v = 0; v < spec.variables.size(); ++v) {
      float* w = cpu_vars.weights[v].data<float>();
      const float* g = cpu_vars.gradients[v].data<float>();
      const float scale = 0.1f / std::max<int64_t>(n, 1);
      for (int64_t i = 0; i < cpu_vars.weights[v].num_elements(); ++i) {
        w[i] -= scale * g[i];
      }
    }
    // New weights: a new version (backends may cache per version).
    StepInput eval_input = input;
    eval_input.weights_version += 1000;
    absl::StatusOr<StepResult> want_eval =
        pair.cpu->Evaluate(eval_input, cpu_vars.weight_map);
    absl::StatusOr<StepResult> got_eval =
        pair.gpu->Evaluate(eval_input, cpu_vars.weight_map);
    ASSERT_TRUE(want_eval.ok()) << want_eval.status();
    ASSERT_TRUE(got_eval.ok()) << got_eval.status();
    EXPECT_EQ(got_eval->correct, want_eval->correct);
    EXPECT_NEAR(got_eval->loss_sum, want_eval->loss_sum,
                kRelative * std::max(1.0, std::fabs(want_eval->loss_sum)));
  }
}

// The logits head of the graph models: Flatten `reads`, then Dense "out".
std::vector<std::string> Head(const std::string& reads, int classes) {
  return {GraphLayer("Flatten", "flat", "", {reads}),
          GraphDense("out", classes, "flat")};
}

std::vector<std::string> Join(std::vector<std::string> a,
                              const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Batches of 6 then 1 (1 example: single-row shapes); with `mse`, a step
// of MSE (the loss that keeps a final softmax) too.
void CompareGraph(const std::string& what, const std::string& json,
                  bool mse) {
  const ModelSpec spec = MustParse(json);
  CompareTraining(what, spec, LossKind::kSparseCrossEntropy, {6, 1}, 2);
  if (mse) {
    CompareTraining(absl::StrCat(what, ", mse"), spec,
                    LossKind::kMeanSquaredError, {5}, 1);
  }
}

}  // namespace gpu_test
}  // namespace worker
}  // namespace pstrain
