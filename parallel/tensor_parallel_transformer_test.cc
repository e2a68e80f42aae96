// A model-parallel group computes what one process computes, for the
// Transformer encoder examples/transformer_tp.keras3.json with the layout
// examples/transformer_tp.layout.json: the embedding split by vocabulary,
// attention by heads, the MLP column- then row-parallel, dropout (after the
// attention, replicated; in the MLP, split) on. Members run as threads over
// a LocalGroup; the one process is the CPU backend on the whole model.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/tensor.h"
#include "compute/backend.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/model_test_util.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "parallel/equivalence_test_util.h"
#include "parallel/layout_map.h"
#include "parallel/local_group_collective.h"
#include "parallel/tensor_parallel_member.h"
#include "parallel/tensor_parallel_plan.h"
#include "parallel/variable_slice.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::ModelSpec;

constexpr int64_t kSequence = 8;
constexpr int32_t kVocabulary = 256;
constexpr int kTransformerSteps = kSteps;  // 50

ModelSpec Transformer() {
  absl::StatusOr<ModelSpec> spec =
      worker::LoadModel("examples/transformer_tp.keras3.json", kSeed);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

std::string Layout() {
  absl::StatusOr<std::string> text =
      ReadLayoutMapFile("examples/transformer_tp.layout.json");
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "{}";
}

// Token ids and labels for kTransformerSteps global batches; the label is a
// function of the ids, so training has something to learn.
struct TokenData {
  std::vector<int32_t> ids;  // [steps * kGlobalBatch, kSequence]
  std::vector<int32_t> labels;
};

TokenData MakeTokens() {
  std::mt19937 gen(4321);
  std::uniform_int_distribution<int32_t> id(0, kVocabulary - 1);
  TokenData data;
  for (int e = 0; e < kTransformerSteps * kGlobalBatch; ++e) {
    int32_t sum = 0;
    for (int64_t t = 0; t < kSequence; ++t) {
      data.ids.push_back(id(gen));
      sum += data.ids.back();
    }
    data.labels.push_back(sum % 10);
  }
  return data;
}

worker::StepInput Input(const TokenData& data, int step, int64_t first,
                        int64_t batch) {
  const int64_t at = int64_t{step} * kGlobalBatch + first;
  worker::StepInput in;
  in.features = data.ids.data() + at * kSequence;
  in.labels = data.labels.data() + at;
  in.batch = batch;
  in.step = step;
  in.example_offset = first;
  in.weights_version = step + 1;
  return in;
}

// What one member ends with.
struct MemberRun {
  absl::Status status;
  TensorParallelPlan plan;
  std::vector<double> losses;                       // per step
  double inference_loss = 0;  // Evaluate's, with steps == 0
  std::map<std::string, std::vector<float>> parts;  // weights, or gradients
};

// The mesh data:D,model:M on D*M threads from `initial`: `steps` steps of
// SGD (gradients summed over the D groups), or with steps == 0 one
// TrainStep at step 3 whose gradients are returned as the parts.
std::vector<MemberRun> RunMesh(const ModelSpec& spec, const TokenData& data,
                               const Variables& initial, int d, int m,
                               int steps) {
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(Layout());
  EXPECT_TRUE(map.ok()) << map.status();
  if (!map.ok()) return {};
  absl::StatusOr<VariableSplits> splits = map->Resolve(spec.variables, m);
  EXPECT_TRUE(splits.ok()) << splits.status();
  if (!splits.ok()) return {};
  std::vector<std::unique_ptr<LocalGroup>> model_groups, data_groups;
  for (int i = 0; i < d; ++i) {
    model_groups.push_back(std::make_unique<LocalGroup>(m));
  }
  for (int i = 0; i < m; ++i) {
    data_groups.push_back(std::make_unique<LocalGroup>(d));
  }
  std::vector<MemberRun> runs(d * m);
  const int64_t group_batch = kGlobalBatch / d;
  auto member_main = [&](int task) {
    const int at_data = task / m, at_model = task % m;
    MemberRun& run = runs[task];
    auto fail = [&](absl::Status status) {
      run.status = status;
      model_groups[at_data]->Cancel(status);
      data_groups[at_model]->Cancel(status);
    };
    absl::StatusOr<TensorParallelPlan> plan =
        PlanTensorParallel(spec, *splits, m, at_model);
    if (!plan.ok()) return fail(plan.status());
    run.plan = *plan;
    std::unique_ptr<GroupCollective> group =
        model_groups[at_data]->Member(at_model);
    std::unique_ptr<GroupCollective> replicas =
        data_groups[at_model]->Member(at_data);
    TensorParallelMemberOptions options;
    options.run_seed = kSeed;
    options.num_threads = 1;
    absl::StatusOr<std::unique_ptr<TensorParallelMember>> member =
        TensorParallelMember::Create(spec, *plan, group.get(), options);
    if (!member.ok()) return fail(member.status());
    MemberTensors parts = CutParts(*plan, initial);
    for (int step = 0; step < std::max(steps, 1); ++step) {
      const int at_step = steps == 0 ? 3 : step;
      absl::StatusOr<worker::StepResult> r = (*member)->TrainStep(
          Input(data, at_step, at_data * group_batch, group_batch),
          parts.weight_map, &parts.gradient_map);
      if (!r.ok()) return fail(r.status());
      run.losses.push_back(r->loss_sum);
      if (steps == 0) {
        absl::StatusOr<worker::StepResult> e = (*member)->Evaluate(
            Input(data, at_step, at_data * group_batch, group_batch),
            parts.weight_map);
        if (!e.ok()) return fail(e.status());
        run.inference_loss = e->loss_sum;
        break;
      }
      absl::Status updated = SgdStep(parts, d > 1 ? replicas.get() : nullptr);
      if (!updated.ok()) return fail(updated);
    }
    for (const auto& [name, t] : steps == 0 ? parts.gradients : parts.weights) {
      auto flat = t.flat<float>();
      run.parts[name] = {flat.begin(), flat.end()};
    }
  };
  std::vector<std::thread> threads;
  for (int task = 0; task < d * m; ++task) {
    threads.emplace_back(member_main, task);
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

// Group `g`'s members' parts put together into whole variables; a
// replicated variable must be the same on every member.
Variables Assemble(const std::vector<MemberRun>& runs, int m, int g,
                   const Variables& like) {
  Variables whole = like;
  for (int k = 0; k < m; ++k) {
    const MemberRun& r = runs[g * m + k];
    for (const auto& [name, var] : r.plan.variables) {
      if (!var.split()) {
        EXPECT_EQ(r.parts.at(name), runs[g * m].parts.at(name))
            << name << " differs between members of group " << g;
      }
      CopySliceIn(r.parts.at(name).data(), var, whole[name].data());
    }
  }
  return whole;
}

class TransformerEquivalence : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = Transformer();
    data_ = MakeTokens();
    vars_ = worker::cpu::MakeVariables(spec_, worker::cpu::Init::kKeras, 3);
    initial_ = Snapshot(spec_, vars_.weights);
    worker::CpuBackendOptions options;
    options.num_threads = 1;
    options.run_seed = kSeed;
    absl::StatusOr<std::unique_ptr<worker::Backend>> backend =
        worker::CreateCpuBackend(spec_, options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }

  ModelSpec spec_;
  TokenData data_;
  worker::cpu::ModelVariables vars_;
  Variables initial_;
  std::unique_ptr<worker::Backend> backend_;
};

TEST_F(TransformerEquivalence, LossAndEveryGradientEqualTheWholeModels) {
  const worker::StepInput in = Input(data_, 3, 0, kGlobalBatch);
  absl::StatusOr<worker::StepResult> whole =
      backend_->TrainStep(in, vars_.weight_map, &vars_.gradient_map);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const Variables expected = Snapshot(spec_, vars_.gradients);
  // Dropout is on: the training loss is not the inference loss.
  absl::StatusOr<worker::StepResult> inference =
      backend_->Evaluate(in, vars_.weight_map);
  ASSERT_TRUE(inference.ok()) << inference.status();
  EXPECT_GT(std::fabs(inference->loss_sum - whole->loss_sum), 1e-3);
  for (int m : {2, 4}) {
    std::vector<MemberRun> runs = RunMesh(spec_, data_, initial_, 1, m, 0);
    ASSERT_EQ(runs.size(), size_t(m));
    for (const MemberRun& r : runs) {
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_NEAR(r.losses[0], whole->loss_sum,
                  1e-5 * std::fabs(whole->loss_sum));
      EXPECT_NEAR(r.inference_loss, inference->loss_sum,
                  1e-5 * std::fabs(inference->loss_sum));
    }
    const Variables gradients = Assemble(runs, m, 0, initial_);
    for (const auto& [name, g] : expected) {
      double scale = 1;
      for (float x : g) scale = std::max(scale, double{std::fabs(x)});
      EXPECT_LT(LargestDifference({{name, gradients.at(name)}}, {{name, g}}),
                1e-5 * scale)
          << "model:" << m << " gradient of " << name;
    }
    // Each member holds 1/M of each split variable.
    EXPECT_EQ(runs[0].parts.at("embedding/embeddings").size(),
              size_t(kVocabulary * 32 / m));
    EXPECT_EQ(runs[0].parts.at("attention/query/kernel").size(),
              size_t(32 * 4 * 8 / m));
    EXPECT_EQ(runs[0].parts.at("ffn_output/kernel").size(),
              size_t(64 * 32 / m));
  }
}

TEST_F(TransformerEquivalence, TrainsToTheOneProcesssWeights) {
  std::vector<double> losses;
  for (int step = 0; step < kTransformerSteps; ++step) {
    absl::StatusOr<worker::StepResult> r =
        backend_->TrainStep(Input(data_, step, 0, kGlobalBatch),
                            vars_.weight_map, &vars_.gradient_map);
    ASSERT_TRUE(r.ok()) << r.status();
    losses.push_back(r->loss_sum);
    for (size_t v = 0; v < vars_.weights.size(); ++v) {
      float* w = vars_.weights[v].data<float>();
      const float* g = vars_.gradients[v].data<float>();
      for (int64_t i = 0; i < vars_.weights[v].num_elements(); ++i) {
        w[i] -= kLearningRate * g[i] / kGlobalBatch;
      }
    }
  }
  const Variables trained = Snapshot(spec_, vars_.weights);
  EXPECT_GT(LargestDifference(initial_, trained), 1e-3);
  for (const auto& [d, m] : std::vector<std::pair<int, int>>{{1, 2}, {2, 2}}) {
    std::vector<MemberRun> runs =
        RunMesh(spec_, data_, initial_, d, m, kTransformerSteps);
    ASSERT_EQ(runs.size(), size_t(d * m));
    for (const MemberRun& r : runs) ASSERT_TRUE(r.status.ok()) << r.status;
    for (int g = 0; g < d; ++g) {
      const double difference =
          LargestDifference(Assemble(runs, m, g, initial_), trained);
      EXPECT_LT(difference, 1e-5) << "data:" << d << ",model:" << m;
    }
    for (int step = 0; step < kTransformerSteps; ++step) {
      double sum = 0;
      for (int g = 0; g < d; ++g) sum += runs[g * m].losses[step];
      EXPECT_NEAR(sum, losses[step], 1e-4 * std::fabs(losses[step]));
    }
  }
}

TEST_F(TransformerEquivalence, RefusesAnIdOutsideTheVocabulary) {
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(Layout());
  ASSERT_TRUE(map.ok()) << map.status();
  absl::StatusOr<VariableSplits> splits = map->Resolve(spec_.variables, 1);
  ASSERT_TRUE(splits.ok()) << splits.status();
  absl::StatusOr<TensorParallelPlan> plan =
      PlanTensorParallel(spec_, *splits, 1, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  LocalGroup group(1);
  std::unique_ptr<GroupCollective> one = group.Member(0);
  absl::StatusOr<std::unique_ptr<TensorParallelMember>> member =
      TensorParallelMember::Create(spec_, *plan, one.get(),
                                   TensorParallelMemberOptions());
  ASSERT_TRUE(member.ok()) << member.status();
  TokenData data = data_;
  data.ids[5] = kVocabulary + 44;
  absl::StatusOr<worker::StepResult> r = (*member)->TrainStep(
      Input(data, 0, 0, 4), vars_.weight_map, &vars_.gradient_map);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(
                "layer 'embedding': id 300 is outside [0, 256)"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
