#include "ps/embedding_table.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/training.pb.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace ps {
namespace {

constexpr int64_t kWidth = 2;
constexpr float kInit = 0.5f;

// A growing table [0, 2] whose rows start at 0.5, with `lifecycle`.
VariableDef GrowingDef(int64_t min_count, int64_t ttl_steps,
                       int64_t max_rows) {
  VariableDef def;
  def.set_name("emb");
  def.set_dtype(DT_FLOAT);
  def.mutable_shape()->add_dims(0);
  def.mutable_shape()->add_dims(kWidth);
  def.mutable_initializer()->mutable_constant()->set_value(kInit);
  def.set_sparse(true);
  if (min_count != 0 || ttl_steps != 0 || max_rows != 0) {
    def.mutable_lifecycle()->set_min_count(min_count);
    def.mutable_lifecycle()->set_ttl_steps(ttl_steps);
    def.mutable_lifecycle()->set_max_rows(max_rows);
  }
  return def;
}

std::unique_ptr<Optimizer> Sgd() {
  OptimizerConfig config;
  config.mutable_sgd();
  config.set_learning_rate(1.0);
  return *CreateOptimizer(config);
}

std::unique_ptr<Optimizer> Adagrad() {
  OptimizerConfig config;
  config.mutable_adagrad()->set_initial_accumulator_value(0.1f);
  config.mutable_adagrad()->set_epsilon_outside_sqrt(true);
  config.set_learning_rate(0.1);
  return *CreateOptimizer(config);
}

std::unique_ptr<EmbeddingTable> Make(const VariableDef& def,
                                     const Optimizer* optimizer) {
  absl::StatusOr<std::unique_ptr<EmbeddingTable>> table =
      EmbeddingTable::CreateGrowing(def, 0, 1, optimizer);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *std::move(table) : nullptr;
}

std::vector<float> Pull(EmbeddingTable& table, std::vector<int64_t> ids) {
  std::vector<float> out(ids.size() * kWidth, -1.0f);
  absl::StatusOr<int64_t> version =
      table.Read(ids, 0, absl::Now() + absl::Seconds(10), out.data());
  EXPECT_TRUE(version.ok()) << version.status();
  return out;
}

// Pushes gradient `g` for every element of each id's row (batch size 1).
void Push(EmbeddingTable& table, std::vector<int64_t> ids, float g) {
  std::vector<float> grads(ids.size() * kWidth, g);
  table.ApplyAsync(ids, grads.data(), 1);
}

std::vector<int64_t> Ids(const EmbeddingTable& table) {
  std::vector<int64_t> ids;
  std::vector<std::vector<float>> arrays;
  table.Snapshot(&ids, &arrays);
  return ids;
}

TEST(EmbeddingTable, WithoutLifecycleAPullCreatesTheRow) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table = Make(GrowingDef(0, 0, 0), sgd.get());
  EXPECT_EQ(Pull(*table, {7}), std::vector<float>({kInit, kInit}));
  EXPECT_EQ(table->num_rows(), 1);
  EXPECT_FALSE(table->has_lifecycle());
}

TEST(EmbeddingTable, AReadOnlyPullReadsWhatAPullWouldCreateWithoutStoringIt) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  VariableDef def = GrowingDef(0, 0, 0);
  def.mutable_initializer()->mutable_random_uniform()->set_minval(-1);
  def.mutable_initializer()->mutable_random_uniform()->set_maxval(1);
  std::unique_ptr<EmbeddingTable> peeked = Make(def, sgd.get());
  std::unique_ptr<EmbeddingTable> pulled = Make(def, sgd.get());
  const std::vector<int64_t> ids = {3, 8};
  std::vector<float> peek(ids.size() * kWidth);
  ASSERT_TRUE(peeked
                  ->Read(ids, 0, absl::Now() + absl::Seconds(10), peek.data(),
                         /*read_only=*/true)
                  .ok());
  EXPECT_EQ(peeked->num_rows(), 0);
  const std::vector<float> created = Pull(*pulled, ids);
  EXPECT_EQ(pulled->num_rows(), 2);
  EXPECT_EQ(peek, created);
  EXPECT_NE(peek[0], peek[kWidth]);  // Per-id values, not one constant.

  // A stored row is read as it is.
  Push(*peeked, {3}, 0.25f);
  ASSERT_TRUE(peeked
                  ->Read(ids, 0, absl::Now() + absl::Seconds(10), peek.data(),
                         /*read_only=*/true)
                  .ok());
  EXPECT_EQ(peeked->num_rows(), 1);
  EXPECT_FLOAT_EQ(peek[0], created[0] - 0.25f);
  EXPECT_EQ(peek[kWidth], created[kWidth]);
}

TEST(EmbeddingTable, AReadOnlyPullReadsZerosWhileAdmissionHoldsARowBack) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table = Make(GrowingDef(2, 0, 0), sgd.get());
  std::vector<float> peek(kWidth, -1.0f);
  ASSERT_TRUE(table
                  ->Read({5}, 0, absl::Now() + absl::Seconds(10), peek.data(),
                         /*read_only=*/true)
                  .ok());
  EXPECT_EQ(peek, std::vector<float>({0, 0}));
  EXPECT_EQ(table->num_rows(), 0);
}

TEST(EmbeddingTable, AdmitsARowAtItsMinCountthUpdate) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table = Make(GrowingDef(3, 0, 0), sgd.get());
  EXPECT_EQ(Pull(*table, {7}), std::vector<float>({0, 0}));
  EXPECT_EQ(table->num_rows(), 0);
  Push(*table, {7}, 0.25f);
  Push(*table, {7}, 0.25f);
  // Two updates counted, gradients dropped, still zeros.
  EXPECT_EQ(table->num_rows(), 0);
  EXPECT_EQ(table->num_pending(), 1);
  EXPECT_EQ(Pull(*table, {7}), std::vector<float>({0, 0}));
  Push(*table, {7}, 0.25f);
  // The third creates the row from the initializer and applies its own
  // gradient only.
  EXPECT_EQ(table->num_rows(), 1);
  EXPECT_EQ(table->num_pending(), 0);
  EXPECT_EQ(Pull(*table, {7}), std::vector<float>({kInit - 0.25f, kInit - 0.25f}));
  EXPECT_EQ(table->version(), 3);
}

TEST(EmbeddingTable, PullsDoNotCountTowardsAdmission) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table = Make(GrowingDef(2, 0, 0), sgd.get());
  for (int i = 0; i < 5; ++i) Pull(*table, {4, 9});
  EXPECT_EQ(table->num_rows(), 0);
  EXPECT_EQ(table->num_pending(), 0);
  Push(*table, {4, 9}, 1.0f);
  EXPECT_EQ(table->num_rows(), 0);
  Push(*table, {9}, 1.0f);
  EXPECT_EQ(Ids(*table), std::vector<int64_t>({9}));
  EXPECT_EQ(Pull(*table, {4, 9}), std::vector<float>({0, 0, kInit - 1, kInit - 1}));
}

// A sync step counts an id once, however many workers pushed it.
TEST(EmbeddingTable, ASyncStepCountsAnIdOnce) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table = Make(GrowingDef(2, 0, 0), sgd.get());
  table->SetWorkers(2, {});
  const std::vector<int64_t> ids = {5};
  const std::vector<float> g(kWidth, 1.0f);
  for (int worker = 0; worker < 2; ++worker) {
    Contribution c;
    c.sender = worker;
    c.batch_size = 1;
    EXPECT_TRUE(table->AccumulateSync(0, ids, g.data(), c));
  }
  EXPECT_EQ(table->version(), 1);
  EXPECT_EQ(table->num_rows(), 0);  // one count, not two
  for (int worker = 0; worker < 2; ++worker) {
    Contribution c;
    c.sender = worker;
    c.batch_size = 1;
    EXPECT_TRUE(table->AccumulateSync(1, ids, g.data(), c));
  }
  EXPECT_EQ(table->num_rows(), 1);
  // The admitting step's average gradient (2 / 2 examples) applied once.
  EXPECT_EQ(Pull(*table, {5}), std::vector<float>({kInit - 1, kInit - 1}));
}

TEST(EmbeddingTable, TtlRemovesRowsNotUpdatedForTtlSteps) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table = Make(GrowingDef(0, 3, 0), sgd.get());
  Push(*table, {1, 2}, 0.125f);  // version 1
  Push(*table, {1}, 0.125f);     // 2
  Push(*table, {1}, 0.125f);     // 3: row 2 not updated for 2 versions
  EXPECT_EQ(Ids(*table), std::vector<int64_t>({1, 2}));
  Push(*table, {1}, 0.125f);  // 4: for 3
  EXPECT_EQ(Ids(*table), std::vector<int64_t>({1}));
  EXPECT_EQ(table->rows_expired(), 1);
  // Gone: pulled again, it starts over from the initializer.
  EXPECT_EQ(Pull(*table, {2, 1}),
            std::vector<float>({kInit, kInit, kInit - 0.5f, kInit - 0.5f}));
}

TEST(EmbeddingTable, TtlAlsoForgetsPendingCounts) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table = Make(GrowingDef(2, 2, 0), sgd.get());
  Push(*table, {3}, 1.0f);  // counted once at version 1
  Push(*table, {8}, 1.0f);  // 2
  Push(*table, {8}, 1.0f);  // 3: id 3 uncounted for 2 versions, forgotten
  EXPECT_EQ(table->num_pending(), 0);
  Push(*table, {3}, 1.0f);  // counts 1 again: not admitted
  EXPECT_EQ(Ids(*table), std::vector<int64_t>({8}));
}

TEST(EmbeddingTable, LfuEvictsTheLeastFrequentlyUpdatedRows) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> table =
      Make(GrowingDef(0, 0, 10), sgd.get());
  // Id k is updated k + 1 times (ids 0..9): the table is full.
  for (int64_t k = 0; k < 10; ++k) {
    for (int64_t n = 0; n <= k; ++n) Push(*table, {k}, 0.0f);
  }
  EXPECT_EQ(table->num_rows(), 10);
  Push(*table, {100}, 0.0f);  // evicts one (10 / 10): id 0
  std::vector<int64_t> want = {1, 2, 3, 4, 5, 6, 7, 8, 9, 100};
  EXPECT_EQ(Ids(*table), want);
  // Id 100 (1 update) is now the least frequent, though the newest.
  Push(*table, {101}, 0.0f);
  want = {1, 2, 3, 4, 5, 6, 7, 8, 9, 101};
  EXPECT_EQ(Ids(*table), want);
  EXPECT_EQ(table->rows_evicted(), 2);
}

TEST(EmbeddingTable, MemoryCapHeldOverManyDistinctIds) {
  std::unique_ptr<Optimizer> adagrad = Adagrad();
  constexpr int64_t kMax = 3000;
  std::unique_ptr<EmbeddingTable> table =
      Make(GrowingDef(0, 0, kMax), adagrad.get());
  int64_t most_rows = 0, most_bytes = 0;
  for (int64_t batch = 0; batch < 200; ++batch) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 100; ++i) ids.push_back(batch * 100 + i);
    if (batch % 2 == 0) {
      Pull(*table, ids);
    } else {
      Push(*table, ids, 0.5f);
    }
    most_rows = std::max(most_rows, table->num_rows());
    most_bytes = std::max(most_bytes, table->bytes_held());
  }
  EXPECT_EQ(most_rows, kMax);
  EXPECT_EQ(table->rows_evicted(), 20000 - table->num_rows());
  // Storage: the cap's blocks plus one spare block of 1024 rows.
  const int64_t row_bytes = kWidth * 2 * sizeof(float);
  EXPECT_LE(most_bytes, (kMax + 1023) / 1024 * 1024 * row_bytes + 1024 * row_bytes);
  EXPECT_GT(table->bytes_per_row(), row_bytes);  // plus id and metadata
  // Rows kept are intact: the newest ids, each at its own value.
  std::vector<float> recent = Pull(*table, {19999});
  EXPECT_NEAR(recent[0], kInit - 0.1f * 0.5f / (std::sqrt(0.1f + 0.25f) + 0.0f), 1e-6);
}

// Storage grows by blocks that double up to a huge page per array and stay
// that size after: rows on either side of every boundary keep their own
// values and slots, narrow rows (many doublings) and wide ones (none) alike.
TEST(EmbeddingTable, RowsInEveryBlockKeepTheirOwnValuesAndSlots) {
  std::unique_ptr<Optimizer> adagrad = Adagrad();
  // Width 2: blocks of 1024, 2048, ... 262144 rows, then 262144 each (the
  // doubling ends at row 523264). Width 512: 1024 rows (2 MiB) each.
  for (const auto& [width, rows] :
       {std::pair<int64_t, int64_t>{2, 800000}, {512, 4100}}) {
    VariableDef def = GrowingDef(0, 0, 0);
    def.mutable_shape()->set_dims(1, width);
    std::unique_ptr<EmbeddingTable> table = Make(def, adagrad.get());
    std::vector<int64_t> ids(rows);
    std::vector<float> grads(rows * width);
    for (int64_t i = 0; i < rows; ++i) {
      ids[i] = 3 * i + 1;
      for (int64_t j = 0; j < width; ++j) {
        grads[i * width + j] = static_cast<float>((i + j) % 7) - 3.0f;
      }
    }
    table->ApplyAsync(ids, grads.data(), 1);
    ASSERT_EQ(table->num_rows(), rows);
    const int64_t row_bytes = width * 2 * sizeof(float);
    EXPECT_GE(table->bytes_held(), rows * row_bytes);
    EXPECT_LE(table->bytes_held(), 2 * rows * row_bytes);
    std::vector<int64_t> snapshot_ids;
    std::vector<std::vector<float>> arrays;
    table->Snapshot(&snapshot_ids, &arrays);
    ASSERT_EQ(snapshot_ids, ids);  // ascending already
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < width; ++j) {
        // Adagrad from accumulator 0.1: g^2 added, then w -= 0.1 g / sqrt(a).
        const float g = grads[i * width + j];
        const float accumulator = 0.1f + g * g;
        ASSERT_EQ(arrays[1][i * width + j], accumulator)
            << "width " << width << " row " << i;
        ASSERT_NEAR(arrays[0][i * width + j],
                    kInit - 0.1f * g / std::sqrt(accumulator), 1e-6)
            << "width " << width << " row " << i;
      }
    }
  }
}

TEST(EmbeddingTable, SnapshotAndRestoreKeepSlotsCountsAndPending) {
  std::unique_ptr<Optimizer> adagrad = Adagrad();
  const VariableDef def = GrowingDef(3, 0, 0);
  std::unique_ptr<EmbeddingTable> table = Make(def, adagrad.get());
  for (int i = 0; i < 4; ++i) Push(*table, {1}, 0.5f);  // admitted, count 4
  for (int i = 0; i < 3; ++i) Push(*table, {2}, 0.25f);  // admitted, count 3
  Push(*table, {5}, 1.0f);
  Push(*table, {5}, 1.0f);                               // pending, 2
  std::vector<int64_t> ids;
  std::vector<std::vector<float>> arrays;
  EmbeddingTable::RowStats stats;
  const int64_t version = table->Snapshot(&ids, &arrays, &stats);
  EXPECT_EQ(version, 9);
  EXPECT_EQ(ids, std::vector<int64_t>({1, 2}));
  EXPECT_EQ(stats.counts, std::vector<int64_t>({4, 3}));
  EXPECT_EQ(stats.last_updates, std::vector<int64_t>({4, 7}));
  EXPECT_EQ(stats.pending_ids, std::vector<int64_t>({5}));
  EXPECT_EQ(stats.pending_counts, std::vector<int64_t>({2}));
  EXPECT_EQ(stats.pending_last_seen, std::vector<int64_t>({9}));

  std::unique_ptr<EmbeddingTable> restored = Make(def, adagrad.get());
  restored->Restore(ids, arrays, version, &stats);
  std::vector<int64_t> ids2;
  std::vector<std::vector<float>> arrays2;
  EmbeddingTable::RowStats stats2;
  EXPECT_EQ(restored->Snapshot(&ids2, &arrays2, &stats2), version);
  EXPECT_EQ(ids2, ids);
  EXPECT_EQ(arrays2, arrays);  // values and the accumulator slot
  EXPECT_EQ(stats2.counts, stats.counts);
  EXPECT_EQ(stats2.last_updates, stats.last_updates);
  EXPECT_EQ(stats2.pending_ids, stats.pending_ids);
  // Id 5's two counts came back: its next update admits it.
  Push(*restored, {5}, 1.0f);
  EXPECT_EQ(restored->num_rows(), 3);
}

TEST(EmbeddingTable, RestoreOverTheCapEvictsDownToIt) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  std::unique_ptr<EmbeddingTable> big = Make(GrowingDef(0, 0, 0), sgd.get());
  for (int64_t id = 0; id < 8; ++id) {
    for (int64_t n = 0; n <= id; ++n) Push(*big, {id}, 0.0f);
  }
  std::vector<int64_t> ids;
  std::vector<std::vector<float>> arrays;
  EmbeddingTable::RowStats stats;
  const int64_t version = big->Snapshot(&ids, &arrays, &stats);
  std::unique_ptr<EmbeddingTable> small = Make(GrowingDef(0, 0, 5), sgd.get());
  small->Restore(ids, arrays, version, &stats);
  EXPECT_EQ(Ids(*small), std::vector<int64_t>({3, 4, 5, 6, 7}));
}

TEST(EmbeddingTable, RefusesBadLifecycles) {
  std::unique_ptr<Optimizer> sgd = Sgd();
  absl::StatusOr<std::unique_ptr<EmbeddingTable>> table =
      EmbeddingTable::CreateGrowing(GrowingDef(0, -1, 0), 0, 1, sgd.get());
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().message(),
            "variable 'emb': lifecycle.ttl_steps: -1 must be >= 0");
  VariableDef fixed = GrowingDef(2, 0, 0);
  fixed.mutable_shape()->set_dims(0, 10);
  table = EmbeddingTable::CreateFixed(fixed, 0, 10, sgd.get());
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().message(),
            "variable 'emb': a lifecycle applies to growing tables (shape[0] "
            "0) only");
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
