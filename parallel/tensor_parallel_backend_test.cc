// TensorParallelBackend against a simulated ps: data:2,model:2 members of
// the seed 000 MLP pull their parts of the split variables (and the
// replicated ones whole), push gradients of the same shapes, and the "ps"
// divides each element's summed pushes by the summed batch sizes of the
// pushes that covered it, as ps tasks in sync mode do (ps/dense_variable.h).
// After 50 steps the weights equal the CPU backend's in one process with
// the global batch.
#include "parallel/tensor_parallel_backend.h"

#include <cmath>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/model_test_util.h"
#include "gtest/gtest.h"
#include "parallel/equivalence_test_util.h"
#include "parallel/local_group_collective.h"
#include "parallel/tensor_parallel_setup.h"
#include "parallel/variable_slice.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::ModelSpec;

TEST(TensorParallelBackend, GroupsPushingToASyncPsTrainWhatOneProcessTrains) {
  const ModelSpec spec = SeedMlp();
  const Data data = MakeData(kFeatures);
  const Trained reference = TrainOneProcess(spec, data, Loss());
  ASSERT_EQ(reference.losses.size(), size_t{kSteps});

  constexpr int kWorkers = 4;
  absl::StatusOr<TensorParallelSetup> setup =
      SetUpTensorParallel(spec, "data:2,model:2", kColumnD1RowD2, kWorkers);
  ASSERT_TRUE(setup.ok()) << setup.status();
  const Mesh mesh = setup->mesh;
  std::vector<std::unique_ptr<LocalGroup>> groups;
  for (int d = 0; d < mesh.data; ++d) {
    groups.push_back(std::make_unique<LocalGroup>(mesh.model));
  }
  std::vector<std::unique_ptr<GroupCollective>> collectives;
  std::vector<std::unique_ptr<worker::Backend>> backends;
  TensorParallelMemberOptions options;
  options.run_seed = kSeed;
  options.loss = Loss().kind;
  options.loss_input = Loss().input;
  for (int task = 0; task < kWorkers; ++task) {
    const MeshCoordinates at = mesh.CoordinatesOf(task);
    collectives.push_back(groups[at.data]->Member(at.model));
    auto backend = TensorParallelBackend::Create(
        spec, setup->plans[at.model], collectives.back().get(), options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backends.push_back(std::move(*backend));
  }

  // The ps's variables, from the same initial values as the reference.
  worker::cpu::ModelVariables ps =
      worker::cpu::MakeVariables(spec, worker::cpu::Init::kKeras, 3);
  ASSERT_EQ(Snapshot(spec, ps.weights), reference.initial);
  // Each worker's pulled weights and pushed gradients, in its shapes.
  std::vector<std::vector<Tensor>> pulled(kWorkers), pushed(kWorkers);
  std::vector<worker::Weights> weight_maps(kWorkers);
  std::vector<worker::Gradients> gradient_maps(kWorkers);
  for (int task = 0; task < kWorkers; ++task) {
    const TensorParallelPlan& plan =
        setup->plans[mesh.CoordinatesOf(task).model];
    pulled[task].reserve(spec.variables.size());
    pushed[task].reserve(spec.variables.size());
    for (const VariableDef& def : spec.variables) {
      const MemberVariable& var = plan.variables.at(def.name());
      pulled[task].push_back(*Tensor::Create(DT_FLOAT, var.local_shape));
      pushed[task].push_back(*Tensor::Create(DT_FLOAT, var.local_shape));
      weight_maps[task][def.name()] = &pulled[task].back();
      gradient_maps[task][def.name()] = &pushed[task].back();
    }
  }
  const int group_batch = kGlobalBatch / mesh.data;
  for (int step = 0; step < kSteps; ++step) {
    for (int task = 0; task < kWorkers; ++task) {
      const TensorParallelPlan& plan =
          setup->plans[mesh.CoordinatesOf(task).model];
      for (size_t v = 0; v < spec.variables.size(); ++v) {
        CopySliceOut(ps.weights[v].data<float>(),
                     plan.variables.at(spec.variables[v].name()),
                     pulled[task][v].data<float>());
      }
    }
    std::vector<absl::StatusOr<worker::StepResult>> results(
        kWorkers, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int task = 0; task < kWorkers; ++task) {
      threads.emplace_back([&, task] {
        const MeshCoordinates at = mesh.CoordinatesOf(task);
        const int64_t first =
            int64_t{step} * kGlobalBatch + int64_t{at.data} * group_batch;
        worker::StepInput in;
        in.features = data.features.data() + first * kFeatures;
        in.labels = data.labels.data() + first;
        in.batch = group_batch;
        in.step = step;
        in.example_offset = int64_t{at.data} * group_batch;
        results[task] = backends[task]->TrainStep(in, weight_maps[task],
                                                  &gradient_maps[task]);
      });
    }
    for (std::thread& t : threads) t.join();
    int64_t examples = 0;
    double loss_sum = 0;
    for (int task = 0; task < kWorkers; ++task) {
      ASSERT_TRUE(results[task].ok()) << results[task].status();
      examples += results[task]->examples;
      loss_sum += results[task]->loss_sum;
    }
    ASSERT_EQ(examples, int64_t{kGlobalBatch} * mesh.model);
    // The reported losses average to the one process's mean loss.
    EXPECT_NEAR(loss_sum / examples, reference.losses[step] / kGlobalBatch,
                1e-5)
        << "step " << step;
    for (size_t v = 0; v < ps.weights.size(); ++v) {
      const int64_t n = ps.weights[v].num_elements();
      std::vector<float> sum(n, 0.0f);
      std::vector<int64_t> covering(n, 0);
      for (int task = 0; task < kWorkers; ++task) {
        const MemberVariable& var =
            setup->plans[mesh.CoordinatesOf(task).model].variables.at(
                spec.variables[v].name());
        std::vector<float> whole(n, 0.0f), covered(n, 0.0f);
        CopySliceIn(pushed[task][v].data<float>(), var, whole.data());
        std::vector<float> ones(var.local_elements(), 1.0f);
        CopySliceIn(ones.data(), var, covered.data());
        for (int64_t i = 0; i < n; ++i) {
          sum[i] += whole[i];
          covering[i] += covered[i] > 0 ? group_batch : 0;
        }
      }
      float* w = ps.weights[v].data<float>();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_GT(covering[i], 0);
        w[i] -= kLearningRate * sum[i] / covering[i];
      }
    }
  }
  const double difference =
      LargestDifference(Snapshot(spec, ps.weights), reference.trained);
  std::cout << "data:2,model:2 pushing parts: largest difference "
               "from one process "
            << difference << "\n";
  EXPECT_LT(difference, 1e-5);
  EXPECT_GT(LargestDifference(reference.initial, reference.trained), 1e-3);
}

TEST(TensorParallelBackend, EvaluateMatchesTheCpuBackendWithDropoutOff) {
  const ModelSpec spec = SeedMlp();
  const Data data = MakeData(kFeatures);
  absl::StatusOr<TensorParallelSetup> setup =
      SetUpTensorParallel(spec, "model:2", kColumnD1, 2);
  ASSERT_TRUE(setup.ok()) << setup.status();
  worker::cpu::ModelVariables vars =
      worker::cpu::MakeVariables(spec, worker::cpu::Init::kKeras, 3);
  worker::StepInput in;
  in.features = data.features.data();
  in.labels = data.labels.data();
  in.batch = kGlobalBatch;
  worker::CpuBackendOptions cpu_options;
  cpu_options.num_threads = 1;
  cpu_options.run_seed = kSeed;
  cpu_options.loss = Loss().kind;
  cpu_options.loss_input = Loss().input;
  auto cpu = worker::CreateCpuBackend(spec, cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<worker::StepResult> expected =
      (*cpu)->Evaluate(in, vars.weight_map);
  ASSERT_TRUE(expected.ok()) << expected.status();

  LocalGroup group(2);
  std::vector<std::vector<Tensor>> parts(2);
  std::vector<worker::Weights> part_maps(2);
  for (int m = 0; m < 2; ++m) {
    parts[m].reserve(spec.variables.size());
    for (size_t v = 0; v < spec.variables.size(); ++v) {
      const MemberVariable& var =
          setup->plans[m].variables.at(spec.variables[v].name());
      parts[m].push_back(*Tensor::Create(DT_FLOAT, var.local_shape));
      CopySliceOut(vars.weights[v].data<float>(), var,
                   parts[m].back().data<float>());
      part_maps[m][spec.variables[v].name()] = &parts[m].back();
    }
  }
  TensorParallelMemberOptions options;
  options.run_seed = kSeed;
  options.loss = Loss().kind;
  options.loss_input = Loss().input;
  std::vector<absl::StatusOr<worker::StepResult>> got(
      2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int m = 0; m < 2; ++m) {
    threads.emplace_back([&, m] {
      std::unique_ptr<GroupCollective> member = group.Member(m);
      auto backend = TensorParallelBackend::Create(spec, setup->plans[m],
                                                   member.get(), options);
      if (!backend.ok()) {
        got[m] = backend.status();
        group.Cancel(backend.status());
        return;
      }
      got[m] = (*backend)->Evaluate(in, part_maps[m]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int m = 0; m < 2; ++m) {
    ASSERT_TRUE(got[m].ok()) << got[m].status();
    EXPECT_NEAR(got[m]->loss_sum, expected->loss_sum,
                1e-5 * std::fabs(expected->loss_sum));
    EXPECT_EQ(got[m]->correct, expected->correct);
    EXPECT_EQ(got[m]->examples, kGlobalBatch);
  }
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
