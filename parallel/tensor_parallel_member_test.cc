// A model-parallel group trains what one process trains: the seed 000 MLP
// (Flatten, Dense d1 200 relu, Dropout 0.4, Dense d2 10 softmax, mse), the
// same seed, initial weights and global batch, 50 SGD steps, computed
// (a) by the CPU backend in one process and (b) by members of a mesh on
// threads, each holding its slices and exchanging activations through a
// LocalGroup; with several groups, gradients are summed across the groups
// (as the ps or the ring would) before the update. Weights must agree to
// 1e-5, dropout included.
#include "parallel/tensor_parallel_member.h"

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/ring_participant.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/model_test_util.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "parallel/equivalence_test_util.h"
#include "parallel/layout_map.h"
#include "parallel/local_group_collective.h"
#include "parallel/mesh.h"
#include "parallel/ring_group_collective.h"
#include "parallel/variable_slice.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::ModelSpec;

// What one member of the mesh ends with.
struct MemberResult {
  absl::Status status;
  std::map<std::string, std::vector<float>> parts;  // its trained parts
  std::vector<double> losses;
  TensorParallelPlan plan;
};

// The mesh data:D,model:M on D*M threads, from `initial`.
std::vector<MemberResult> TrainMesh(const ModelSpec& spec, const Data& data,
                                    const Loss& loss, const Variables& initial,
                                    const std::string& mesh_spec,
                                    const std::string& layout, int workers,
                                    bool over_grpc) {
  absl::StatusOr<Mesh> mesh = ParseMesh(mesh_spec, workers);
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(layout);
  EXPECT_TRUE(map.ok()) << map.status();
  if (!mesh.ok() || !map.ok()) return {};
  absl::StatusOr<VariableSplits> splits =
      map->Resolve(spec.variables, mesh->model);
  EXPECT_TRUE(splits.ok()) << splits.status();
  if (!splits.ok()) return {};
  // A group per data index (its members exchange activations) and a group
  // per model index (the replicas of its slices sum their gradients).
  std::vector<std::unique_ptr<LocalGroup>> model_groups, data_groups;
  for (int d = 0; d < mesh->data; ++d) {
    model_groups.push_back(std::make_unique<LocalGroup>(mesh->model));
  }
  for (int m = 0; m < mesh->model; ++m) {
    data_groups.push_back(std::make_unique<LocalGroup>(mesh->data));
  }
  // over_grpc: each group's members exchange activations over a gRPC ring
  // (servers on 127.0.0.1 at ports picked now) instead of the LocalGroup.
  std::vector<std::vector<std::unique_ptr<collective::RingParticipant>>> rings;
  if (over_grpc) {
    for (int d = 0; d < mesh->data; ++d) {
      std::vector<std::string> peers;
      for (int m = 0; m < mesh->model; ++m) {
        peers.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
      }
      rings.emplace_back();
      for (int m = 0; m < mesh->model; ++m) {
        collective::RingParticipantOptions options;
        options.rank = m;
        options.peers = peers;
        auto participant = collective::RingParticipant::Start(options);
        EXPECT_TRUE(participant.ok()) << participant.status();
        if (!participant.ok()) return {};
        rings.back().push_back(std::move(*participant));
      }
    }
  }
  std::vector<MemberResult> results(workers);
  const int group_batch = kGlobalBatch / mesh->data;
  auto member_main = [&](int task) {
    const MeshCoordinates at = mesh->CoordinatesOf(task);
    MemberResult& result = results[task];
    auto fail = [&](absl::Status status) {
      result.status = status;
      model_groups[at.data]->Cancel(status);
      data_groups[at.model]->Cancel(status);
    };
    absl::StatusOr<TensorParallelPlan> plan =
        PlanTensorParallel(spec, *splits, mesh->model, at.model);
    if (!plan.ok()) return fail(plan.status());
    result.plan = *plan;
    std::unique_ptr<GroupCollective> group =
        over_grpc ? std::make_unique<RingGroupCollective>(
                        rings[at.data][at.model]->ring(), at.model, mesh->model)
                  : model_groups[at.data]->Member(at.model);
    std::unique_ptr<GroupCollective> replicas =
        data_groups[at.model]->Member(at.data);
    TensorParallelMemberOptions options;
    options.run_seed = kSeed;
    options.loss = loss.kind;
    options.loss_input = loss.input;
    absl::StatusOr<std::unique_ptr<TensorParallelMember>> member =
        TensorParallelMember::Create(spec, *plan, group.get(), options);
    if (!member.ok()) return fail(member.status());
    // The member's parts of the weights, cut from the initial values.
    MemberTensors parts = CutParts(*plan, initial);
    for (int step = 0; step < kSteps; ++step) {
      const int64_t first = int64_t{step} * kGlobalBatch +
                            int64_t{at.data} * group_batch;
      worker::StepInput in;
      in.features = data.features.data() + first * data.features_per_example;
      in.labels = data.labels.data() + first;
      in.batch = group_batch;
      in.step = step;
      in.example_offset = int64_t{at.data} * group_batch;
      absl::StatusOr<worker::StepResult> r =
          (*member)->TrainStep(in, parts.weight_map, &parts.gradient_map);
      if (!r.ok()) return fail(r.status());
      result.losses.push_back(r->loss_sum);
      absl::Status updated =
          SgdStep(parts, mesh->data > 1 ? replicas.get() : nullptr);
      if (!updated.ok()) return fail(updated);
    }
    for (const auto& [name, w] : parts.weights) {
      auto flat = w.flat<float>();
      result.parts[name] = {flat.begin(), flat.end()};
    }
  };
  std::vector<std::thread> threads;
  for (int task = 0; task < workers; ++task) {
    threads.emplace_back(member_main, task);
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// The whole variables put together from group `data_index`'s members.
Variables Assemble(const std::vector<MemberResult>& results, int model,
                   int data_index, const Variables& like) {
  Variables whole = like;
  for (int m = 0; m < model; ++m) {
    const MemberResult& r = results[data_index * model + m];
    for (const auto& [name, var] : r.plan.variables) {
      CopySliceIn(r.parts.at(name).data(), var, whole[name].data());
    }
  }
  return whole;
}

// A model, its data and loss, and the one process's run of them.
struct Case {
  ModelSpec spec;
  Data data;
  Loss loss;
  Trained reference;
};

// Trains the mesh and checks every group's weights against the one
// process's, and returns the members' results.
std::vector<MemberResult> ExpectEquivalent(const Case& c,
                                           const std::string& mesh_spec,
                                           const std::string& layout,
                                           int workers, int model,
                                           bool over_grpc = false) {
  EXPECT_EQ(c.reference.losses.size(), size_t{kSteps});
  if (c.reference.losses.size() != size_t{kSteps}) return {};
  // The run moves the weights far beyond the tolerance.
  EXPECT_GT(LargestDifference(c.reference.initial, c.reference.trained), 1e-3);
  std::vector<MemberResult> results =
      TrainMesh(c.spec, c.data, c.loss, c.reference.initial, mesh_spec, layout,
                workers, over_grpc);
  EXPECT_EQ(results.size(), size_t(workers));
  if (results.size() != size_t(workers)) return {};
  for (const MemberResult& r : results) {
    EXPECT_TRUE(r.status.ok()) << r.status;
    if (!r.status.ok()) return {};
  }
  const int data = workers / model;
  for (int d = 0; d < data; ++d) {
    const Variables whole = Assemble(results, model, d, c.reference.initial);
    const double difference = LargestDifference(whole, c.reference.trained);
    std::cout << mesh_spec << " " << layout << " group " << d
              << ": largest difference from one process " << difference << "\n";
    EXPECT_LT(difference, 1e-5) << mesh_spec << " group " << d;
  }
  // The groups' loss sums add up to the one process's, step by step.
  for (int step = 0; step < kSteps; ++step) {
    double sum = 0;
    for (int d = 0; d < data; ++d) sum += results[d * model].losses[step];
    EXPECT_NEAR(sum, c.reference.losses[step],
                1e-4 * std::fabs(c.reference.losses[step]))
        << "step " << step;
  }
  return results;
}

class MeshEquivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    case_ = new Case;
    case_->spec = SeedMlp();
    case_->data = MakeData(kFeatures);
    case_->reference = TrainOneProcess(case_->spec, case_->data, case_->loss);
  }
  static void TearDownTestSuite() { delete case_; }

  void ExpectEquivalent(const std::string& mesh_spec, const std::string& layout,
                        int workers, int model, bool over_grpc = false) {
    std::vector<MemberResult> results = parallel::ExpectEquivalent(
        *case_, mesh_spec, layout, workers, model, over_grpc);
    // A member holds 1/M of d1's kernel.
    if (!results.empty()) {
      EXPECT_EQ(results[0].parts.at("d1/kernel").size(),
                size_t(kFeatures * 200 / model));
    }
  }

  static Case* case_;
};

Case* MeshEquivalence::case_ = nullptr;

TEST_F(MeshEquivalence, Model2ColumnParallelD1) {
  ExpectEquivalent("data:1,model:2", kColumnD1, 2, 2);
}

TEST_F(MeshEquivalence, Model2ColumnD1RowD2) {
  ExpectEquivalent("data:1,model:2", kColumnD1RowD2, 2, 2);
}

TEST_F(MeshEquivalence, Model4ColumnD1RowD2) {
  ExpectEquivalent("data:1,model:4", kColumnD1RowD2, 4, 4);
}

TEST_F(MeshEquivalence, Data2Model2) {
  ExpectEquivalent("data:2,model:2", kColumnD1, 4, 2);
  ExpectEquivalent("data:2,model:2", kColumnD1RowD2, 4, 2);
}

TEST_F(MeshEquivalence, Data2Model2OverTheGrpcRing) {
  ExpectEquivalent("data:2,model:2", kColumnD1RowD2, 4, 2, /*over_grpc=*/true);
}

TEST_F(MeshEquivalence, Data4Model1) {
  ExpectEquivalent("data:4,model:1", kColumnD1, 4, 1);
}

// A deeper chain that takes every path of the plan: a replicated Dense, a
// row-parallel one on a whole input (its dx all-gathered), a
// column-parallel one whose partial dx is all-reduced, a tanh and a dropout
// on the split activation, and a column-parallel output gathered for the
// loss (sparse cross-entropy from logits).
constexpr int64_t kDeepFeatures = 40;
const char kDeepModel[] = R"({"class_name": "Sequential", "config": {
  "name": "deep", "layers": [
  {"class_name": "InputLayer",
   "config": {"name": "input", "batch_input_shape": [null, 40]}},
  {"class_name": "Dense", "config": {"name": "a", "units": 24,
                                     "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "b", "units": 16,
                                     "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "c", "units": 32,
                                     "activation": "linear"}},
  {"class_name": "Activation", "config": {"name": "act",
                                          "activation": "tanh"}},
  {"class_name": "Dropout", "config": {"name": "drop", "rate": 0.3}},
  {"class_name": "Dense", "config": {"name": "d", "units": 12,
                                     "activation": "linear"}}]}})";
const char kDeepLayout[] = R"({"b/kernel": ["model", null],
  "(c|d)/kernel": [null, "model"], "(c|d)/bias": ["model"]})";

class DeepChainEquivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    case_ = new Case;
    absl::StatusOr<ModelSpec> spec = worker::ParseKerasModel(kDeepModel, kSeed);
    ASSERT_TRUE(spec.ok()) << spec.status();
    case_->spec = *spec;
    case_->data = MakeData(kDeepFeatures);
    case_->loss.kind = worker::LossKind::kSparseCrossEntropy;
    case_->loss.input = worker::LossInput::kLogits;
    case_->reference = TrainOneProcess(case_->spec, case_->data, case_->loss);
  }
  static void TearDownTestSuite() { delete case_; }
  static Case* case_;
};

Case* DeepChainEquivalence::case_ = nullptr;

TEST_F(DeepChainEquivalence, PlanTakesEveryPath) {
  std::vector<MemberResult> results =
      ExpectEquivalent(*case_, "data:1,model:2", kDeepLayout, 2, 2);
  ASSERT_EQ(results.size(), 2u);
  const TensorParallelPlan& plan = results[1].plan;
  EXPECT_TRUE(plan.layers[1].slice_input);            // b
  EXPECT_TRUE(plan.layers[1].needs_input_gradient);   // a before it
  EXPECT_TRUE(plan.layers[2].reduce_input_gradient);  // c
  EXPECT_TRUE(plan.layers[3].output_split);           // tanh
  EXPECT_TRUE(plan.layers[4].output_split);           // dropout
  EXPECT_TRUE(plan.layers[5].gather_input);           // d reads it whole
  EXPECT_TRUE(plan.gather_output);                    // d's slices
  EXPECT_EQ(results[1].parts.at("b/kernel").size(), 12u * 16);
}

TEST_F(DeepChainEquivalence, Model4AndData2Model2) {
  ExpectEquivalent(*case_, "data:1,model:4", kDeepLayout, 4, 4);
  ExpectEquivalent(*case_, "data:2,model:2", kDeepLayout, 4, 2);
}

TEST(TensorParallelMember, RefusesModelsItDoesNotRun) {
  // Two inputs: this version runs models of one.
  absl::StatusOr<ModelSpec> two =
      worker::LoadModel("examples/two_input.keras3.json", kSeed);
  ASSERT_TRUE(two.ok()) << two.status();
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse("{}");
  ASSERT_TRUE(map.ok());
  absl::StatusOr<VariableSplits> splits = map->Resolve(two->variables, 1);
  ASSERT_TRUE(splits.ok());
  absl::StatusOr<TensorParallelPlan> plan =
      PlanTensorParallel(*two, *splits, 1, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  LocalGroup group(1);
  std::unique_ptr<GroupCollective> member = group.Member(0);
  absl::StatusOr<std::unique_ptr<TensorParallelMember>> created =
      TensorParallelMember::Create(*two, *plan, member.get(),
                                   TensorParallelMemberOptions());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find(
                "the model has 2 inputs; this version runs models of one"),
            std::string::npos)
      << created.status();
  // A regularizer, named with its layer.
  ModelSpec mlp = SeedMlp();
  mlp.layers[1].kernel_regularizer.l2 = 0.01f;
  absl::StatusOr<VariableSplits> mlp_splits = map->Resolve(mlp.variables, 1);
  ASSERT_TRUE(mlp_splits.ok());
  absl::StatusOr<TensorParallelPlan> mlp_plan =
      PlanTensorParallel(mlp, *mlp_splits, 1, 0);
  ASSERT_TRUE(mlp_plan.ok()) << mlp_plan.status();
  created = TensorParallelMember::Create(mlp, *mlp_plan, member.get(),
                                         TensorParallelMemberOptions());
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.status().message().find(absl::StrCat(
                "layer '", mlp.layers[1].name, "': has a regularizer")),
            std::string::npos)
      << created.status();
}

TEST(TensorParallelMember, RefusesWeightsNotInTheMembersShape) {
  const ModelSpec spec = SeedMlp();
  absl::StatusOr<LayoutMap> map = LayoutMap::Parse(kColumnD1);
  ASSERT_TRUE(map.ok());
  absl::StatusOr<VariableSplits> splits = map->Resolve(spec.variables, 2);
  ASSERT_TRUE(splits.ok());
  absl::StatusOr<TensorParallelPlan> plan =
      PlanTensorParallel(spec, *splits, 2, 0);
  ASSERT_TRUE(plan.ok());
  LocalGroup group(2);
  std::unique_ptr<GroupCollective> member = group.Member(0);
  absl::StatusOr<std::unique_ptr<TensorParallelMember>> tp =
      TensorParallelMember::Create(spec, *plan, member.get(),
                                   TensorParallelMemberOptions());
  ASSERT_TRUE(tp.ok()) << tp.status();
  // The whole kernel where the member's half belongs.
  worker::cpu::ModelVariables whole =
      worker::cpu::MakeVariables(spec, worker::cpu::Init::kKeras);
  std::vector<float> features(kFeatures, 0.5f);
  std::vector<int32_t> labels = {3};
  worker::StepInput in;
  in.features = features.data();
  in.labels = labels.data();
  in.batch = 1;
  absl::StatusOr<worker::StepResult> r =
      (*tp)->TrainStep(in, whole.weight_map, &whole.gradient_map);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("weight 'd1/kernel' is float32 [784, "
                                      "200], expected float32 [784, 100]"),
            std::string::npos)
      << r.status();
  // A group of another size than the plan's.
  LocalGroup three(3);
  std::unique_ptr<GroupCollective> other = three.Member(0);
  EXPECT_EQ(TensorParallelMember::Create(spec, *plan, other.get(),
                                         TensorParallelMemberOptions())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain
