#include "compute/cpu/sgd_throughput.h"

#include <chrono>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "compute/backend.h"
#include "compute/device_backend.h"
#include "data/dataset.h"
#include "data/idx_reader.h"
#include "model/keras_model.h"
#include "ps/initializer.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

absl::Status CheckOptions(const SgdThroughputOptions& o) {
  if (o.threads < 1 || o.batch < 1 || o.steps < 1 || o.warmup_steps < 0 ||
      !(o.learning_rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sgd throughput: need threads >= 1, batch >= 1, steps >= 1, "
        "warmup_steps >= 0 and learning_rate > 0; got ",
        o.threads, ", ", o.batch, ", ", o.steps, ", ", o.warmup_steps, ", ",
        o.learning_rate));
  }
  return absl::OkStatus();
}

// The model's variables, from their initializers, with gradient buffers.
struct Variables {
  std::vector<Tensor> weights;
  std::vector<Tensor> gradients;
  Weights weight_map;
  Gradients gradient_map;
};

absl::StatusOr<std::unique_ptr<Variables>> MakeVariables(
    const ModelSpec& spec) {
  auto vars = std::make_unique<Variables>();
  for (const VariableDef& def : spec.variables) {
    PSTRAIN_RETURN_IF_ERROR(ps::CheckInitializer(def));
    std::vector<int64_t> shape(def.shape().dims().begin(),
                               def.shape().dims().end());
    PSTRAIN_ASSIGN_OR_RETURN(Tensor w, Tensor::Create(DT_FLOAT, shape));
    PSTRAIN_ASSIGN_OR_RETURN(Tensor g, Tensor::Create(DT_FLOAT, shape));
    ps::FillRows(def, 0, shape.empty() ? 1 : shape[0], w.data<float>());
    vars->weights.push_back(std::move(w));
    vars->gradients.push_back(std::move(g));
  }
  for (size_t i = 0; i < spec.variables.size(); ++i) {
    vars->weight_map[spec.variables[i].name()] = &vars->weights[i];
    vars->gradient_map[spec.variables[i].name()] = &vars->gradients[i];
  }
  return vars;
}

}  // namespace

absl::StatusOr<SgdThroughputResult> RunSgdThroughput(
    const SgdThroughputOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(CheckOptions(options));
  PSTRAIN_ASSIGN_OR_RETURN(
      data::Dataset dataset,
      data::ReadIdx(options.images_path, options.labels_path));
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec,
                           LoadModel(options.model, options.seed));
  const int64_t example_size = dataset.features.row_elements();
  int64_t input_size = 1;
  for (int64_t d : spec.input_shape) input_size *= d;
  if (spec.input_dtype != DT_FLOAT || input_size != example_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("sgd throughput: model '", options.model, "' takes ",
                     ShapeString(spec.input_shape),
                     ", the dataset's images have ", example_size, " pixels"));
  }
  if (dataset.size() < options.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("sgd throughput: the dataset has ", dataset.size(),
                     " examples, fewer than one batch of ", options.batch));
  }

  // Every image as float32, once.
  std::vector<int64_t> all(dataset.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> features(dataset.size() * example_size);
  data::GatherFeatures(dataset, all, absl::MakeSpan(features));

  DeviceBackendOptions backend_options;
  backend_options.device = options.device;
  backend_options.cpu_threads = options.threads;
  backend_options.precision = options.precision;
  backend_options.run_seed = options.seed;
  PSTRAIN_ASSIGN_OR_RETURN(DeviceBackend made,
                           CreateDeviceBackend(spec, backend_options));
  const std::unique_ptr<Backend> backend = std::move(made.backend);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Variables> vars,
                           MakeVariables(spec));

  const int64_t batches = dataset.size() / options.batch;
  const int64_t total = options.warmup_steps + options.steps;
  SgdThroughputResult result;
  result.device = made.description;
  auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < total; ++step) {
    if (step == options.warmup_steps) start = std::chrono::steady_clock::now();
    const int64_t first = (step % batches) * options.batch;
    StepInput in;
    in.features = features.data() + first * example_size;
    in.labels = dataset.labels.data() + first;
    in.batch = options.batch;
    in.step = step;
    in.weights_version = static_cast<uint64_t>(step);
    PSTRAIN_ASSIGN_OR_RETURN(
        StepResult r,
        backend->TrainStep(in, vars->weight_map, &vars->gradient_map));
    const float scale = options.learning_rate / options.batch;
    for (size_t v = 0; v < vars->weights.size(); ++v) {
      float* w = vars->weights[v].data<float>();
      const float* g = vars->gradients[v].data<float>();
      const int64_t n = vars->weights[v].num_elements();
      for (int64_t i = 0; i < n; ++i) w[i] -= scale * g[i];
    }
    result.final_loss = r.loss_sum / options.batch + r.l2_loss;
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  result.images_per_sec = options.steps * options.batch / result.seconds;
  return result;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
