#include "parallel/equivalence_test_util.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/model_test_util.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "parallel/variable_slice.h"

namespace pstrain {
namespace parallel {

using worker::ModelSpec;

ModelSpec SeedMlp() {
  absl::StatusOr<ModelSpec> spec =
      worker::LoadModel("examples/seed000_mlp.keras3.json", kSeed);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

Data MakeData(int64_t features_per_example) {
  std::mt19937 gen(1234);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> label(0, 9);
  Data data;
  data.features_per_example = features_per_example;
  data.features.resize(int64_t{kSteps} * kGlobalBatch * features_per_example);
  for (float& f : data.features) f = pixel(gen);
  for (int i = 0; i < kSteps * kGlobalBatch; ++i) {
    data.labels.push_back(label(gen));
  }
  return data;
}

Variables Snapshot(const ModelSpec& spec,
                   const std::vector<Tensor>& tensors) {
  Variables out;
  for (size_t v = 0; v < spec.variables.size(); ++v) {
    auto flat = tensors[v].flat<float>();
    out[spec.variables[v].name()] = {flat.begin(), flat.end()};
  }
  return out;
}

double LargestDifference(const Variables& a, const Variables& b) {
  double largest = 0;
  for (const auto& [name, values] : a) {
    const std::vector<float>& other = b.at(name);
    EXPECT_EQ(values.size(), other.size()) << name;
    for (size_t i = 0; i < values.size() && i < other.size(); ++i) {
      largest = std::max(largest, std::fabs(double{values[i]} - other[i]));
    }
  }
  return largest;
}

Trained TrainOneProcess(const ModelSpec& spec, const Data& data,
                        const Loss& loss) {
  worker::cpu::ModelVariables vars =
      worker::cpu::MakeVariables(spec, worker::cpu::Init::kKeras, 3);
  Trained run;
  run.initial = Snapshot(spec, vars.weights);
  worker::CpuBackendOptions options;
  options.num_threads = 1;
  options.run_seed = kSeed;
  options.loss = loss.kind;
  options.loss_input = loss.input;
  absl::StatusOr<std::unique_ptr<worker::Backend>> backend =
      worker::CreateCpuBackend(spec, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return run;
  for (int step = 0; step < kSteps; ++step) {
    worker::StepInput in;
    in.features = data.features.data() +
                  int64_t{step} * kGlobalBatch * data.features_per_example;
    in.labels = data.labels.data() + step * kGlobalBatch;
    in.batch = kGlobalBatch;
    in.step = step;
    in.weights_version = step + 1;
    absl::StatusOr<worker::StepResult> r =
        (*backend)->TrainStep(in, vars.weight_map, &vars.gradient_map);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.losses.push_back(r->loss_sum);
    for (size_t v = 0; v < vars.weights.size(); ++v) {
      float* w = vars.weights[v].data<float>();
      const float* g = vars.gradients[v].data<float>();
      for (int64_t i = 0; i < vars.weights[v].num_elements(); ++i) {
        w[i] -= kLearningRate * g[i] / kGlobalBatch;
      }
    }
  }
  run.trained = Snapshot(spec, vars.weights);
  return run;
}

MemberTensors CutParts(const TensorParallelPlan& plan, const Variables& whole) {
  MemberTensors member;
  for (const auto& [name, var] : plan.variables) {
    Tensor w = *Tensor::Create(DT_FLOAT, var.local_shape);
    CopySliceOut(whole.at(name).data(), var, w.data<float>());
    member.weights.emplace(name, std::move(w));
    member.gradients.emplace(name, *Tensor::Create(DT_FLOAT, var.local_shape));
    member.weight_map[name] = &member.weights.at(name);
    member.gradient_map[name] = &member.gradients.at(name);
  }
  return member;
}

absl::Status SgdStep(MemberTensors& member, GroupCollective* replicas) {
  for (auto& [name, g] : member.gradients) {
    if (replicas != nullptr) {
      absl::Status s = replicas->AllReduceSum(g.flat<float>());
      if (!s.ok()) return s;
    }
    float* w = member.weights.at(name).data<float>();
    const float* grad = g.data<float>();
    for (int64_t i = 0; i < g.num_elements(); ++i) {
      w[i] -= kLearningRate * grad[i] / kGlobalBatch;
    }
  }
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace pstrain
