// CheckpointRows against the ps itself: a growing table trained a little,
// saved as a checkpoint holds it, reads back for every id (stored or not)
// exactly what the table's read-only pull gives, the pull the chief's own
// evaluation makes.
#include "chief/checkpoint_rows.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/training.pb.h"
#include "ps/embedding_table.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace chief {
namespace {

constexpr int64_t kWidth = 3;

// A growing table [0, 3], rows drawn uniform in [-1, 1) per id.
VariableDef GrowingDef(int64_t min_count) {
  VariableDef def;
  def.set_name("emb/embeddings");
  def.set_dtype(DT_FLOAT);
  def.set_sparse(true);
  def.mutable_shape()->add_dims(0);
  def.mutable_shape()->add_dims(kWidth);
  def.mutable_initializer()->mutable_random_uniform()->set_minval(-1);
  def.mutable_initializer()->mutable_random_uniform()->set_maxval(1);
  def.mutable_initializer()->set_seed(77);
  if (min_count > 1) def.mutable_lifecycle()->set_min_count(min_count);
  return def;
}

std::unique_ptr<ps::Optimizer> Sgd() {
  OptimizerConfig config;
  config.mutable_sgd();
  config.set_learning_rate(0.5);
  return *ps::CreateOptimizer(config);
}

// What a checkpoint of `table` holds, as ReadVariables gives it.
ReadCheckpoint Saved(const ps::EmbeddingTable& table, const VariableDef& def) {
  std::vector<int64_t> ids;
  std::vector<std::vector<float>> arrays;
  table.Snapshot(&ids, &arrays);
  ReadCheckpoint checkpoint;
  checkpoint.index.set_step(7);
  *checkpoint.index.mutable_config()->add_variables() = def;
  WholeVariable rows;
  rows.name = def.name();
  rows.shape = {static_cast<int64_t>(ids.size()), kWidth};
  rows.data.assign(reinterpret_cast<const char*>(arrays[0].data()),
                   arrays[0].size() * sizeof(float));
  WholeVariable id_bytes;
  id_bytes.name = def.name() + "/ids";
  id_bytes.dtype = DT_INT64;
  id_bytes.shape = {static_cast<int64_t>(ids.size())};
  id_bytes.data.assign(reinterpret_cast<const char*>(ids.data()),
                       ids.size() * 8);
  checkpoint.variables = {rows, id_bytes};
  return checkpoint;
}

std::vector<float> ReadOnlyPull(ps::EmbeddingTable& table,
                                const std::vector<int64_t>& ids) {
  std::vector<float> out(ids.size() * kWidth, -9.0f);
  EXPECT_TRUE(table
                  .Read(ids, 0, absl::Now() + absl::Seconds(10), out.data(),
                        /*read_only=*/true)
                  .ok());
  return out;
}

// Trains rows of ids 5, 1 << 40 and 12 (twice: admitted with min_count 2)
// and 3 (once), then compares the checkpoint's rows with the table's for
// those ids and ids never touched.
void CheckAgainstTheTable(int64_t min_count) {
  const VariableDef def = GrowingDef(min_count);
  std::unique_ptr<ps::Optimizer> sgd = Sgd();
  std::unique_ptr<ps::EmbeddingTable> table =
      ps::EmbeddingTable::CreateGrowing(def, 0, 1, sgd.get()).value();
  const std::vector<int64_t> trained = {5, int64_t{1} << 40, 12};
  std::vector<float> g(trained.size() * kWidth);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * (i + 1);
  for (int push = 0; push < 2; ++push) table->ApplyAsync(trained, g.data(), 1);
  const std::vector<int64_t> once = {3};
  table->ApplyAsync(once, g.data(), 1);

  const ReadCheckpoint checkpoint = Saved(*table, def);
  absl::StatusOr<CheckpointRows> rows = CheckpointRows::Create(checkpoint);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->num_rows(def.name()), table->num_rows());
  EXPECT_EQ(rows->num_rows(def.name()), min_count > 1 ? 3 : 4);

  const std::vector<int64_t> ids = {
      12, 3, 999, int64_t{1} << 40, 5, (int64_t{1} << 62) + 17, 0};
  std::vector<float> out(ids.size() * kWidth, -9.0f);
  ASSERT_TRUE(rows->Pull(def.name(), ids, out.data()).ok());
  EXPECT_EQ(out, ReadOnlyPull(*table, ids));
  // The rows are not all alike: trained rows differ from their initial
  // values, and untouched ids read their own initial rows (or zeros).
  std::vector<float> fresh(kWidth);
  ps::EmbeddingTable::FillAbsentRow(GrowingDef(1), 12, fresh.data());
  EXPECT_NE(std::vector<float>(out.begin(), out.begin() + kWidth), fresh);
  std::vector<float> untouched(out.begin() + 2 * kWidth,
                               out.begin() + 3 * kWidth);
  if (min_count > 1) {
    EXPECT_EQ(untouched, std::vector<float>(kWidth, 0.0f));
  } else {
    ps::EmbeddingTable::FillAbsentRow(def, 999, fresh.data());
    EXPECT_EQ(untouched, fresh);
    EXPECT_NE(untouched, std::vector<float>(kWidth, 0.0f));
  }
}

TEST(CheckpointRows, ReadsWhatTheTablesReadOnlyPullGives) {
  CheckAgainstTheTable(/*min_count=*/1);
}

TEST(CheckpointRows, UnderAdmissionAnAbsentIdReadsZerosAsOnThePs) {
  CheckAgainstTheTable(/*min_count=*/2);
}

TEST(CheckpointRows, RefusesAnUnknownTableAndRowsWithoutTheirIds) {
  const VariableDef def = GrowingDef(1);
  std::unique_ptr<ps::Optimizer> sgd = Sgd();
  std::unique_ptr<ps::EmbeddingTable> table =
      ps::EmbeddingTable::CreateGrowing(def, 0, 1, sgd.get()).value();
  const std::vector<int64_t> ids = {4};
  std::vector<float> g(kWidth, 1.0f);
  table->ApplyAsync(ids, g.data(), 1);
  ReadCheckpoint checkpoint = Saved(*table, def);
  absl::StatusOr<CheckpointRows> rows = CheckpointRows::Create(checkpoint);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<float> out(kWidth);
  const absl::Status unknown = rows->Pull("other", ids, out.data());
  EXPECT_TRUE(absl::IsNotFound(unknown)) << unknown;
  EXPECT_NE(unknown.message().find("'other'"), std::string::npos) << unknown;

  checkpoint.variables[0].data.resize(kWidth * sizeof(float) - 1);
  absl::StatusOr<CheckpointRows> short_rows =
      CheckpointRows::Create(checkpoint);
  EXPECT_TRUE(absl::IsDataLoss(short_rows.status())) << short_rows.status();
  EXPECT_NE(short_rows.status().message().find("'emb/embeddings'"),
            std::string::npos)
      << short_rows.status();
  checkpoint.variables.pop_back();
  EXPECT_TRUE(absl::IsDataLoss(CheckpointRows::Create(checkpoint).status()));
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
