#include "collective/local_replica.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_layout.h"
#include "chief/checkpointer.h"
#include "collective/replica_checkpoint.h"
#include "collective/ring_participant.h"
#include "gtest/gtest.h"
#include "ps/initializer.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace worker {
namespace {

VariableDef Def(const std::string& name, std::vector<int64_t> shape) {
  VariableDef def;
  def.set_name(name);
  def.set_dtype(DT_FLOAT);
  for (int64_t d : shape) def.mutable_shape()->add_dims(d);
  def.mutable_initializer()->mutable_random_uniform()->set_minval(-1);
  def.mutable_initializer()->mutable_random_uniform()->set_maxval(1);
  def.mutable_initializer()->set_seed(7);
  return def;
}

OptimizerConfig Sgd(float lr) {
  OptimizerConfig config;
  config.set_learning_rate(lr);
  config.mutable_sgd();
  return config;
}

OptimizerConfig Adam() {
  OptimizerConfig config;
  config.set_learning_rate(0.01f);
  config.mutable_adam()->set_beta_1(0.9f);
  config.mutable_adam()->set_beta_2(0.999f);
  config.mutable_adam()->set_epsilon(1e-7f);
  return config;
}

Tensor Filled(std::vector<int64_t> shape, float start) {
  Tensor t = *Tensor::Create(DT_FLOAT, shape);
  float* p = t.flat<float>().data();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = start + 0.25f * i;
  return t;
}

std::vector<float> Values(LocalReplica& replica, const VariableDef& def) {
  std::vector<int64_t> shape(def.shape().dims().begin(),
                             def.shape().dims().end());
  Tensor t = *Tensor::Create(DT_FLOAT, shape);
  EXPECT_TRUE(replica.PullDense(0, {{def.name(), &t}}).ok());
  return std::vector<float>(t.flat<float>().begin(), t.flat<float>().end());
}

TEST(LocalReplica, StartsFromTheInitializerAsAPsWould) {
  const VariableDef w = Def("w", {3, 2});
  LocalReplicaOptions options;
  options.variables = {w};
  options.optimizer = Sgd(0.5f);
  auto replica = LocalReplica::Create(options);
  ASSERT_TRUE(replica.ok()) << replica.status();
  std::vector<float> expected(6);
  ASSERT_TRUE(ps::CheckInitializer(w).ok());
  ps::FillRows(w, 0, 3, expected.data());
  EXPECT_EQ(Values(**replica, w), expected);
  EXPECT_EQ((*replica)->version(), 0);
}

TEST(LocalReplica, OneWorkerAppliesTheGradientOverItsBatch) {
  const VariableDef w = Def("w", {4});
  LocalReplicaOptions options;
  options.variables = {w};
  options.optimizer = Sgd(0.5f);
  auto replica = LocalReplica::Create(options);
  ASSERT_TRUE(replica.ok());
  const std::vector<float> before = Values(**replica, w);
  Tensor g = Filled({4}, 1.0f);
  (*replica)->set_step(0, {0});
  ASSERT_TRUE((*replica)->PushDense(0, 4, {{"w", &g}}).ok());
  const std::vector<float> after = Values(**replica, w);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(after[i], before[i] - 0.5f * (1.0f + 0.25f * i) / 4);
  }
  EXPECT_EQ((*replica)->version(), 1);
  // Pulling a version not reached is refused, not waited for.
  Tensor out = *Tensor::Create(DT_FLOAT, {4});
  EXPECT_EQ((*replica)->PullDense(2, {{"w", &out}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(LocalReplica, RefusesAnEmbeddingTableAndAMissingRing) {
  VariableDef table = Def("table", {10, 4});
  table.set_sparse(true);
  LocalReplicaOptions options;
  options.variables = {table};
  options.optimizer = Sgd(0.1f);
  auto refused = LocalReplica::Create(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(refused.status().message().find("'table'"), std::string::npos);
  options.variables = {Def("w", {2})};
  options.num_workers = 2;
  EXPECT_EQ(LocalReplica::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalReplica, TwoWorkersApplyTheSumOverTheGlobalBatchAndStayEqual) {
  const VariableDef w = Def("w", {5, 3});
  const VariableDef b = Def("b", {3});
  std::vector<std::string> peers;
  for (int r = 0; r < 2; ++r) {
    peers.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  std::vector<std::unique_ptr<collective::RingParticipant>> rings;
  std::vector<std::unique_ptr<LocalReplica>> replicas;
  for (int r = 0; r < 2; ++r) {
    collective::RingParticipantOptions ring;
    ring.rank = r;
    ring.peers = peers;
    auto started = collective::RingParticipant::Start(ring);
    ASSERT_TRUE(started.ok()) << started.status();
    rings.push_back(*std::move(started));
    LocalReplicaOptions options;
    options.variables = {w, b};
    options.optimizer = Adam();
    options.ring = rings.back()->ring();
    options.num_workers = 2;
    auto replica = LocalReplica::Create(options);
    ASSERT_TRUE(replica.ok()) << replica.status();
    replicas.push_back(*std::move(replica));
  }
  // One replica alone, applying the workers' summed gradient: what a
  // sync ps does with the two pushes.
  LocalReplicaOptions alone_options;
  alone_options.variables = {w, b};
  alone_options.optimizer = Adam();
  auto alone = LocalReplica::Create(alone_options);
  ASSERT_TRUE(alone.ok());
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<Tensor> gw, gb;
    for (int r = 0; r < 2; ++r) {
      gw.push_back(Filled({5, 3}, r + step - 2.0f));
      gb.push_back(Filled({3}, 1.0f - r * step));
    }
    std::vector<absl::Status> pushed(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        replicas[r]->set_step(step, {});
        pushed[r] =
            replicas[r]->PushDense(step, 8, {{"w", &gw[r]}, {"b", &gb[r]}});
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(pushed[r].ok()) << pushed[r];
    Tensor sw = Filled({5, 3}, step - 2.0f), sb = Filled({3}, 1.0f);
    {
      Tensor w1 = Filled({5, 3}, step - 1.0f), b1 = Filled({3}, 1.0f - step);
      for (int64_t i = 0; i < 15; ++i) {
        sw.flat<float>()[i] += w1.flat<float>()[i];
      }
      for (int64_t i = 0; i < 3; ++i)
        sb.flat<float>()[i] += b1.flat<float>()[i];
    }
    // The one replica pushes the sum of both workers' 8 examples: 16.
    ASSERT_TRUE((*alone)->PushDense(step, 16, {{"w", &sw}, {"b", &sb}}).ok());
  }
  for (const VariableDef* def : {&w, &b}) {
    const std::vector<float> zero = Values(*replicas[0], *def);
    EXPECT_EQ(zero, Values(*replicas[1], *def)) << def->name();
    EXPECT_EQ(zero, Values(**alone, *def)) << def->name();
  }
}

TEST(LocalReplica, BucketsGoInReverseModelOrderAndAreFew) {
  LocalReplicaOptions options;
  options.variables = {Def("a", {250}), Def("b", {10}), Def("c", {250}),
                       Def("d", {10})};
  options.optimizer = Sgd(0.1f);
  options.bucket_bytes = 1000;  // closes after c (40 + 1000 bytes)
  auto replica = LocalReplica::Create(options);
  ASSERT_TRUE(replica.ok()) << replica.status();
  EXPECT_EQ((*replica)->buckets(),
            (std::vector<std::vector<int>>{{3, 2}, {1, 0}}));
  options.bucket_bytes = 1;
  replica = LocalReplica::Create(options);
  ASSERT_TRUE(replica.ok()) << replica.status();
  EXPECT_EQ((*replica)->buckets(),
            (std::vector<std::vector<int>>{{3}, {2}, {1}, {0}}));
  // At most kMaxBucketsPerStep: the rest share the last.
  options.variables.clear();
  for (int v = 0; v < 20; ++v) {
    options.variables.push_back(Def(absl::StrCat("v", 100 + v), {4}));
  }
  replica = LocalReplica::Create(options);
  ASSERT_TRUE(replica.ok()) << replica.status();
  ASSERT_EQ((*replica)->buckets().size(), LocalReplica::kMaxBucketsPerStep);
  EXPECT_EQ((*replica)->buckets().back(), (std::vector<int>{4, 3, 2, 1, 0}));
  options.bucket_bytes = 0;
  EXPECT_EQ(LocalReplica::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalReplica, GradientsReportedEarlyOrLateReduceToTheSameValues) {
  const std::vector<VariableDef> defs = {Def("a", {7, 3}), Def("b", {3}),
                                         Def("c", {3, 5}), Def("d", {5})};
  std::vector<std::string> peers;
  for (int r = 0; r < 2; ++r) {
    peers.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  std::vector<std::unique_ptr<collective::RingParticipant>> rings;
  std::vector<std::unique_ptr<LocalReplica>> replicas;
  for (int r = 0; r < 2; ++r) {
    collective::RingParticipantOptions ring;
    ring.rank = r;
    ring.peers = peers;
    auto started = collective::RingParticipant::Start(ring);
    ASSERT_TRUE(started.ok()) << started.status();
    rings.push_back(*std::move(started));
    LocalReplicaOptions options;
    options.variables = defs;
    options.optimizer = Adam();
    options.ring = rings.back()->ring();
    options.num_workers = 2;
    options.bucket_bytes = 1;  // a bucket per variable
    auto replica = LocalReplica::Create(options);
    ASSERT_TRUE(replica.ok()) << replica.status();
    replicas.push_back(*std::move(replica));
  }
  LocalReplicaOptions alone_options;
  alone_options.variables = defs;
  alone_options.optimizer = Adam();
  auto alone = LocalReplica::Create(alone_options);
  ASSERT_TRUE(alone.ok());
  for (int64_t step = 0; step < 3; ++step) {
    // gradients[r][v]; the sum of both workers' for `alone`.
    std::vector<std::vector<Tensor>> gradients(2);
    std::vector<Tensor> sums;
    for (const VariableDef& def : defs) {
      const std::vector<int64_t> shape(def.shape().dims().begin(),
                                       def.shape().dims().end());
      Tensor sum = *Tensor::Create(DT_FLOAT, shape);
      for (int r = 0; r < 2; ++r) {
        gradients[r].push_back(Filled(shape, r - step * 0.5f));
        for (int64_t i = 0; i < sum.num_elements(); ++i) {
          sum.flat<float>()[i] = (r == 0 ? 0.0f : sum.flat<float>()[i]) +
                                 gradients[r].back().flat<float>()[i];
        }
      }
      sums.push_back(std::move(sum));
    }
    std::vector<absl::Status> pushed(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        std::vector<Tensor>& g = gradients[r];
        // Worker 0 reports every gradient as a backward would (last
        // variable first) before pushing; worker 1 reports two, in model
        // order, and leaves the rest to the push.
        const std::vector<int> reports =
            r == 0 ? std::vector<int>{3, 2, 1, 0} : std::vector<int>{0, 2};
        for (int v : reports) {
          replicas[r]->GradientReady(step, defs[v].name(), g[v].flat<float>());
        }
        replicas[r]->set_step(step, {});
        pushed[r] = replicas[r]->PushDense(
            step, 8, {{"a", &g[0]}, {"b", &g[1]}, {"c", &g[2]}, {"d", &g[3]}});
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(pushed[r].ok()) << pushed[r];
    ASSERT_TRUE((*alone)
                    ->PushDense(step, 16,
                                {{"a", &sums[0]},
                                 {"b", &sums[1]},
                                 {"c", &sums[2]},
                                 {"d", &sums[3]}})
                    .ok());
  }
  for (const VariableDef& def : defs) {
    const std::vector<float> zero = Values(*replicas[0], def);
    EXPECT_EQ(zero, Values(*replicas[1], def)) << def.name();
    EXPECT_EQ(zero, Values(**alone, def)) << def.name();
  }
}

TEST(LocalReplica, AGradientReportedWrongFailsThePush) {
  LocalReplicaOptions options;
  options.variables = {Def("w", {2, 2})};
  options.optimizer = Sgd(0.1f);
  auto replica = LocalReplica::Create(options);
  ASSERT_TRUE(replica.ok()) << replica.status();
  const std::vector<float> before = Values(**replica, options.variables[0]);
  Tensor g = Filled({2, 2}, 1.0f);
  Tensor other = Filled({2, 2}, 1.0f);
  (*replica)->GradientReady(0, "nope", g.flat<float>());
  (*replica)->set_step(0, {});
  absl::Status pushed = (*replica)->PushDense(0, 4, {{"w", &g}});
  EXPECT_EQ(pushed.code(), absl::StatusCode::kInvalidArgument) << pushed;
  EXPECT_NE(pushed.message().find("'nope'"), std::string::npos) << pushed;
  EXPECT_EQ(Values(**replica, options.variables[0]), before);
  // Reported in one buffer, pushed in another.
  (*replica)->GradientReady(1, "w", other.flat<float>());
  (*replica)->set_step(1, {});
  pushed = (*replica)->PushDense(1, 4, {{"w", &g}});
  EXPECT_EQ(pushed.code(), absl::StatusCode::kInvalidArgument) << pushed;
  EXPECT_EQ(Values(**replica, options.variables[0]), before);
  // A clean step goes through.
  (*replica)->set_step(2, {});
  EXPECT_TRUE((*replica)->PushDense(2, 4, {{"w", &g}}).ok());
  EXPECT_NE(Values(**replica, options.variables[0]), before);
}

TEST(ReplicaCheckpoint, SavedThenRestoredGoesOnAsTheOriginal) {
  const VariableDef w = Def("w", {4, 2});
  LocalReplicaOptions options;
  options.variables = {w};
  options.optimizer = Adam();
  auto original = LocalReplica::Create(options);
  auto restored = LocalReplica::Create(options);
  ASSERT_TRUE(original.ok() && restored.ok());
  Tensor g = Filled({4, 2}, -1.0f);
  for (int64_t step = 0; step < 2; ++step) {
    (*original)->set_step(step, {});
    ASSERT_TRUE((*original)->PushDense(step, 2, {{"w", &g}}).ok());
  }
  const std::string model_dir = testing::TempPath("replica-checkpoint");
  std::filesystem::remove_all(model_dir);
  TrainingConfig config;
  config.set_seed(1);
  *config.mutable_optimizer() = Adam();
  *config.add_variables() = w;
  Placement placement;
  chief::CheckpointerOptions checkpoints;
  checkpoints.model_dir = model_dir;
  checkpoints.run_id = "test";
  checkpoints.save_slices = [&](const std::string& dir, int64_t) {
    return SaveReplica(**original, dir);
  };
  chief::Checkpointer checkpointer(checkpoints, &config, &placement, nullptr);
  auto saved = checkpointer.Save(2, 0);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, chief::CheckpointDir(model_dir, 2));
  ASSERT_TRUE(RestoreReplica(*saved, restored->get()).ok());
  EXPECT_EQ((*restored)->version(), 2);
  EXPECT_EQ(Values(**restored, w), Values(**original, w));
  // Adam's moments and step count came back too: one more step agrees.
  for (auto* replica : {original->get(), restored->get()}) {
    replica->set_step(2, {});
    ASSERT_TRUE(replica->PushDense(2, 2, {{"w", &g}}).ok());
  }
  EXPECT_EQ(Values(**restored, w), Values(**original, w));
  // Another model's checkpoint is refused, naming what is missing.
  LocalReplicaOptions other = options;
  other.variables = {Def("v", {4, 2})};
  auto mismatched = LocalReplica::Create(other);
  ASSERT_TRUE(mismatched.ok());
  absl::Status refused = RestoreReplica(*saved, mismatched->get());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("'v'"), std::string::npos) << refused;
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
