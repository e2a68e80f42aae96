#include "ps/ps_metrics.h"

#include <string>

#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/shard.h"

namespace pstrain {
namespace ps {
namespace {

using ::testing::HasSubstr;

// A float variable "w" of 4 zeros, SGD (or Adam), sync, one worker.
CreateVariablesRequest CreateW(bool adam = false) {
  CreateVariablesRequest create;
  create.mutable_header()->set_run_id("run");
  if (adam) {
    create.mutable_optimizer()->mutable_adam();
  } else {
    create.mutable_optimizer()->mutable_sgd();
  }
  create.mutable_optimizer()->set_learning_rate(0.1);
  create.mutable_update()->set_mode(UpdateConfig::SYNC);
  create.mutable_update()->set_num_workers(1);
  ShardVariable* v = create.add_variables();
  v->mutable_def()->set_name("w");
  v->mutable_def()->set_dtype(DT_FLOAT);
  v->mutable_def()->mutable_shape()->add_dims(4);
  v->mutable_def()->mutable_initializer()->mutable_zeros();
  v->mutable_placement()->set_name("w");
  v->mutable_placement()->set_partitioning(VariablePlacement::WHOLE);
  v->mutable_placement()->add_slices()->set_row_end(4);
  return create;
}

TEST(PsMetrics, ShardCollectorReadsWhatTheShardHolds) {
  MetricsRegistry registry;
  PsMetrics metrics(&registry);
  Shard shard(ShardOptions{});
  metrics.AddShardCollector(&shard);
  EXPECT_THAT(registry.Render(), HasSubstr("\npstrain_ps_variables 0\n"));
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(CreateW(), &created).ok());
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_variables 1\n"));
  // 4 floats of value; SGD has no slots.
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_held_bytes 16\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_slot_bytes 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr("pstrain_ps_dense_pushes_total{outcome=\"applied\"} 0\n"));
}

TEST(PsMetrics, SlotBytesAreThoseOfTheOptimizersSlots) {
  MetricsRegistry registry;
  PsMetrics metrics(&registry);
  Shard shard(ShardOptions{});
  metrics.AddShardCollector(&shard);
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(CreateW(/*adam=*/true), &created).ok());
  const std::string text = registry.Render();
  // Adam keeps two slots (m and v) of the value's 16 bytes.
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_held_bytes 48\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_slot_bytes 32\n"));
}

// A growing table with FTRL of its own (2 slots) and an admission count:
// its bytes per row, pending ids and metadata are exported.
TEST(PsMetrics, EmbeddingTablesReportBytesPerRowAndPendingIds) {
  MetricsRegistry registry;
  PsMetrics metrics(&registry);
  Shard shard(ShardOptions{});
  metrics.AddShardCollector(&shard);
  CreateVariablesRequest create = CreateW();
  create.mutable_update()->set_mode(UpdateConfig::ASYNC);
  ShardVariable* v = create.add_variables();
  v->mutable_def()->set_name("emb");
  v->mutable_def()->set_dtype(DT_FLOAT);
  v->mutable_def()->set_sparse(true);
  v->mutable_def()->mutable_shape()->add_dims(0);
  v->mutable_def()->mutable_shape()->add_dims(8);
  v->mutable_def()->mutable_initializer()->mutable_zeros();
  v->mutable_def()->mutable_lifecycle()->set_min_count(2);
  OptimizerConfig* ftrl = v->mutable_def()->mutable_optimizer();
  ftrl->set_learning_rate(0.1);
  ftrl->mutable_ftrl()->set_learning_rate_power(-0.5f);
  ftrl->mutable_ftrl()->set_initial_accumulator_value(0.1f);
  v->mutable_placement()->set_name("emb");
  v->mutable_placement()->set_partitioning(VariablePlacement::ROW_HASH);
  v->mutable_placement()->add_slices();
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  PushSparseRequest push;
  push.mutable_header()->set_run_id("run");
  push.set_name("emb");
  push.set_batch_size(1);
  push.add_ids(42);
  push.mutable_gradients()->set_dtype(DT_FLOAT);
  push.mutable_gradients()->mutable_shape()->add_dims(1);
  push.mutable_gradients()->mutable_shape()->add_dims(8);
  push.mutable_gradients()->set_content(std::string(32, '\0'));
  PushSparseResponse pushed;
  ASSERT_TRUE(shard.PushSparse(push, &pushed).ok());
  const std::string text = registry.Render();
  // 3 arrays of 8 floats (96 bytes) plus id, count, version, map entry (41).
  EXPECT_THAT(text,
              HasSubstr("pstrain_ps_embedding_row_bytes{table=\"emb\"} 137\n"));
  EXPECT_THAT(text,
              HasSubstr("pstrain_ps_embedding_pending_ids{table=\"emb\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_embedding_rows{table=\"emb\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_embedding_rows_removed{table=\"emb\","
                              "reason=\"lfu\"} 0\n"));
}

TEST(PsMetrics, CountsByVariableAndMethod) {
  MetricsRegistry registry;
  PsMetrics metrics(&registry);
  metrics.CountPush("w");
  metrics.CountPush("w");
  metrics.CountPull("b");
  PsMetrics::Method push = metrics.ForMethod("PushDense");
  push.requests->Increment();
  push.seconds->Observe(0.002);
  metrics.ObserveSave(0.5, 1234);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("pstrain_ps_pushes_total{variable=\"w\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_pulls_total{variable=\"b\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("pstrain_ps_requests_total{method=\"PushDense\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_request_duration_seconds_count{"
                              "method=\"PushDense\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_checkpoint_size_bytes 1234\n"));
  EXPECT_EQ(metrics.ForMethod("PushDense").requests, push.requests);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
