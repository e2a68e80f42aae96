// Growing embedding tables with a lifecycle (admission count, LFU cap) and
// an optimizer of their own (lazy Adam), on real `ps` processes on
// 127.0.0.1 driven over gRPC by the chief's Checkpointer: a checkpoint of
// one ps task restores onto three, one of three onto two (rows, slots,
// update counts and pending admission counts re-spread by id hash), and a
// ps task killed with SIGKILL gets its piece back from the checkpoint.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "chief/checkpointer.h"
#include "common/placement.h"
#include "gtest/gtest.h"
#include "tests/ps_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr char kRun[] = "run-lifecycle";
constexpr char kTable[] = "emb";
constexpr int64_t kWidth = 4;

// "emb" [0, 4]: admitted at 2 updates, at most `max_rows` rows per ps task,
// lazy Adam of its own.
VariableDef Table(int64_t max_rows) {
  VariableDef def = ConstantVariable(kTable, {0, kWidth}, 0.5f);
  def.set_sparse(true);
  def.mutable_lifecycle()->set_min_count(2);
  def.mutable_lifecycle()->set_max_rows(max_rows);
  OptimizerConfig* own = def.mutable_optimizer();
  own->set_learning_rate(0.05);
  own->mutable_lazy_adam()->set_beta_1(0.9f);
  own->mutable_lazy_adam()->set_beta_2(0.999f);
  own->mutable_lazy_adam()->set_epsilon(1e-7f);
  return def;
}

// A chief of `cluster`: its ps client and checkpointer over the cluster's
// model_dir, the variables created.
struct Chief {
  TrainingConfig config;
  Placement placement;
  std::unique_ptr<ps::PsClusterClient> ps;
  std::unique_ptr<chief::Checkpointer> checkpointer;
};

std::unique_ptr<Chief> StartChief(const PsCluster& cluster, int64_t max_rows) {
  auto chief = std::make_unique<Chief>();
  const std::vector<VariableDef> variables = {Table(max_rows)};
  for (const VariableDef& v : variables) *chief->config.add_variables() = v;
  chief->config.set_model_name("lifecycle");
  PlacementOptions options;
  options.num_ps = cluster.num_ps();
  absl::StatusOr<Placement> placement = ComputePlacement(variables, options);
  EXPECT_TRUE(placement.ok()) << placement.status();
  chief->placement = *placement;
  absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> ps =
      cluster.Connect(kRun, 0, variables);
  EXPECT_TRUE(ps.ok()) << ps.status();
  chief->ps = *std::move(ps);
  EXPECT_TRUE(chief->ps
                  ->CreateVariables(Sgd(0.1), Update(UpdateConfig::ASYNC, 1))
                  .ok());
  chief::CheckpointerOptions checkpointer;
  checkpointer.model_dir = cluster.model_dir();
  checkpointer.run_id = kRun;
  chief->checkpointer = std::make_unique<chief::Checkpointer>(
      checkpointer, &chief->config, &chief->placement, chief->ps.get());
  return chief;
}

void Push(Chief& chief, const std::vector<int64_t>& ids, float g) {
  std::vector<float> rows(ids.size() * kWidth);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = g * (1 + i % kWidth);
  absl::Status status = chief.ps->PushSparse(kTable, ids, rows.data(), 0, 1);
  EXPECT_TRUE(status.ok()) << status;
}

std::vector<float> Pull(Chief& chief, const std::vector<int64_t>& ids) {
  std::vector<float> out(ids.size() * kWidth, -1.0f);
  absl::Status status = chief.ps->PullSparse(kTable, ids, 0, out.data());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Rows and pending ids over every ps task.
std::pair<int64_t, int64_t> Held(Chief& chief, int num_ps) {
  int64_t rows = 0, pending = 0;
  for (int task = 0; task < num_ps; ++task) {
    absl::StatusOr<ShardStatus> status = chief.ps->client(task)->GetShardStatus();
    EXPECT_TRUE(status.ok()) << status.status();
    if (!status.ok()) continue;
    const auto& table = status->embedding_tables().at(kTable);
    rows += table.rows();
    pending += table.pending_ids();
  }
  return {rows, pending};
}

// Copies the checkpoints of `from` into the model_dir of `to` (shared
// storage, as a resized cluster would see it).
void CopyCheckpoints(const PsCluster& from, const PsCluster& to) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(to.model_dir(), error);
  ASSERT_FALSE(error) << to.model_dir() << ": " << error.message();
  fs::copy(from.model_dir(), to.model_dir(),
           fs::copy_options::recursive | fs::copy_options::overwrite_existing,
           error);
  ASSERT_FALSE(error) << from.model_dir() << ": " << error.message();
}

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> ids;
  for (int64_t id = begin; id < end; ++id) ids.push_back(id);
  return ids;
}

TEST(EmbeddingLifecycle, RestoresOntoThreeThenTwoPsTasksAndAfterAKill) {
  // One ps task: ids 0..11 admitted (2 updates), 0..3 a third time, ids
  // 20..22 counted once (pending).
  PsCluster one_ps;
  ASSERT_TRUE(one_ps.Start(1).ok());
  std::unique_ptr<Chief> one = StartChief(one_ps, 100);
  Push(*one, Range(0, 12), 0.5f);
  Push(*one, Range(0, 12), -0.25f);
  Push(*one, Range(0, 4), 1.0f);
  Push(*one, Range(20, 23), 1.0f);
  EXPECT_EQ(Held(*one, 1), std::make_pair(int64_t{12}, int64_t{3}));
  ASSERT_TRUE(one->checkpointer->Save(1, 0).ok());
  const std::vector<float> at_1 = Pull(*one, Range(0, 12));

  // Onto three ps tasks.
  PsCluster three_ps;
  ASSERT_TRUE(three_ps.Start(3).ok());
  CopyCheckpoints(one_ps, three_ps);
  std::unique_ptr<Chief> three = StartChief(three_ps, 100);
  absl::StatusOr<chief::LoadedCheckpoint> restored =
      three->checkpointer->RestoreLatest(1);
  ASSERT_TRUE(restored.ok()) << restored.status();
  three->ps->set_generation(1);
  EXPECT_EQ(Held(*three, 3), std::make_pair(int64_t{12}, int64_t{3}));
  EXPECT_EQ(Pull(*three, Range(0, 12)), at_1);
  // Lazy Adam's slots came along: one more update gives the same rows.
  Push(*one, {5, 6}, 0.75f);
  Push(*three, {5, 6}, 0.75f);
  EXPECT_EQ(Pull(*three, {5, 6}), Pull(*one, {5, 6}));
  // So did the pending counts: one more update admits ids 20 and 21.
  Push(*three, {20, 21}, 1.0f);
  EXPECT_EQ(Held(*three, 3), std::make_pair(int64_t{14}, int64_t{1}));
  ASSERT_TRUE(three->checkpointer->Save(2, 0).ok());
  const std::vector<float> at_2 = Pull(*three, Range(0, 12));

  // ps 1 of 3 is killed (SIGKILL) after more updates, comes back empty,
  // gets its variables from the chief and its rows from the checkpoint.
  Push(*three, Range(0, 12), 2.0f);
  ASSERT_TRUE(three_ps.Restart(1).ok());
  ASSERT_TRUE(three->ps->CreateVariables(Sgd(0.1), Update(UpdateConfig::ASYNC, 1))
                  .ok());
  restored = three->checkpointer->RestoreLatest(2);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->index.step(), 2);
  three->ps->set_generation(2);
  EXPECT_EQ(Pull(*three, Range(0, 12)), at_2);
  EXPECT_EQ(Held(*three, 3), std::make_pair(int64_t{14}, int64_t{1}));

  // Onto two ps tasks capped at 4 rows each: the update counts came along,
  // so each keeps its most updated rows (ids 0..3 and 5, 6 have 3 updates;
  // on ps 0 the even ids 0, 2, 6 and the newest of the 2-update rows).
  PsCluster two_ps;
  ASSERT_TRUE(two_ps.Start(2).ok());
  CopyCheckpoints(three_ps, two_ps);
  std::unique_ptr<Chief> two = StartChief(two_ps, 4);
  restored = two->checkpointer->RestoreLatest(1);
  ASSERT_TRUE(restored.ok()) << restored.status();
  two->ps->set_generation(1);
  EXPECT_EQ(Held(*two, 2).first, 8);
  const std::vector<int64_t> kept = {0, 1, 2, 3, 5, 6};
  std::vector<float> want;
  for (int64_t id : kept) {
    want.insert(want.end(), at_2.begin() + id * kWidth,
                at_2.begin() + (id + 1) * kWidth);
  }
  EXPECT_EQ(Pull(*two, kept), want);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
