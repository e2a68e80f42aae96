#include "ps/shard.h"

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ps/dense_view_testing.h"

namespace pstrain {
namespace ps {
namespace {

constexpr char kRun[] = "run-1";

// Variables: "w" [4, 2] split in rows [0, 2) on ps 0 and [2, 4) on ps 1;
// "b" [3] whole on ps 0. Constant initial values: w 1.0, b 0.5.
CreateVariablesRequest Create(UpdateConfig::Mode mode, int workers,
                              int replicas = 0, int staleness = -1) {
  CreateVariablesRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_ps_task(0);
  r.mutable_optimizer()->mutable_sgd();
  r.mutable_optimizer()->set_learning_rate(0.5);
  UpdateConfig* u = r.mutable_update();
  u->set_mode(mode);
  u->set_num_workers(workers);
  u->set_replicas_to_aggregate(replicas);
  u->set_max_staleness(staleness);
  u->set_step_timeout_ms(5000);
  auto add = [&r](const std::string& name, std::vector<int64_t> dims,
                  float init, std::vector<std::pair<int64_t, int64_t>> rows) {
    ShardVariable* v = r.add_variables();
    v->mutable_def()->set_name(name);
    v->mutable_def()->set_dtype(DT_FLOAT);
    for (int64_t d : dims) v->mutable_def()->mutable_shape()->add_dims(d);
    v->mutable_def()->mutable_initializer()->mutable_constant()->set_value(init);
    v->mutable_placement()->set_name(name);
    v->mutable_placement()->set_partitioning(
        rows.size() > 1 ? VariablePlacement::ROW_RANGES : VariablePlacement::WHOLE);
    for (size_t i = 0; i < rows.size(); ++i) {
      auto* s = v->mutable_placement()->add_slices();
      s->set_ps_task(i);
      s->set_row_begin(rows[i].first);
      s->set_row_end(rows[i].second);
    }
  };
  add("w", {4, 2}, 1.0f, {{0, 2}, {2, 4}});
  add("b", {3}, 0.5f, {{0, 3}});
  return r;
}

NamedTensor Gradient(const std::string& name, std::vector<int64_t> dims,
                     const std::vector<float>& values, int64_t offset = 0) {
  NamedTensor g;
  g.set_name(name);
  TensorProto* t = g.mutable_tensor();
  t->set_dtype(DT_FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dims(d);
  if (name == "w") {
    t->mutable_slice()->set_begin(0);
    t->mutable_slice()->set_end(2);
  }
  t->set_content_offset(offset * 4);
  t->set_content(values.data(), values.size() * 4);
  return g;
}

// A push of gradient sums gw (4 floats, ps 0's rows of w) and gb (3 floats).
PushDenseRequest Push(int64_t version, int64_t batch,
                      const std::vector<float>& gw,
                      const std::vector<float>& gb) {
  PushDenseRequest p;
  p.mutable_header()->set_run_id(kRun);
  p.set_version(version);
  p.set_batch_size(batch);
  *p.add_gradients() = Gradient("w", {4, 2}, gw);
  *p.add_gradients() = Gradient("b", {3}, gb);
  return p;
}

absl::StatusOr<PushDenseResponse> Send(Shard& shard, const PushDenseRequest& p) {
  const PushDenseRequest* messages[] = {&p};
  return shard.PushDense(messages);
}

// The value of `name` (and its version via *version) after min_version.
std::vector<float> Pull(Shard& shard, const std::string& name,
                        int64_t min_version = 0, int64_t* version = nullptr,
                        absl::Status* status = nullptr) {
  PullDenseRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.add_names(name);
  r.set_min_version(min_version);
  std::vector<float> out;
  absl::Status s = shard.PullDense(
      r, [&](const DenseVariable&, const ValueView& value) {
        out.resize(value.size / 4);
        std::memcpy(out.data(), value.data, value.size);
        if (version != nullptr) *version = value.version;
      });
  if (status != nullptr) *status = s;
  EXPECT_TRUE(status != nullptr || s.ok()) << s;
  return out;
}

class ShardTest : public ::testing::Test {
 protected:
  void Init(const CreateVariablesRequest& create) {
    CreateVariablesResponse response;
    ASSERT_TRUE(shard_.CreateVariables(create, &response).ok());
    EXPECT_EQ(response.num_variables(), 2);
  }
  // Expects `push` refused with `code` and a message containing `text`, and
  // nothing changed.
  void ExpectRefused(const PushDenseRequest& push, absl::StatusCode code,
                     const std::string& text) {
    const std::vector<float> w = Pull(shard_, "w"), b = Pull(shard_, "b");
    absl::StatusOr<PushDenseResponse> r = Send(shard_, push);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_NE(r.status().message().find(text), std::string::npos)
        << r.status().message();
    EXPECT_EQ(Pull(shard_, "w"), w);
    EXPECT_EQ(Pull(shard_, "b"), b);
  }

  Shard shard_{ShardOptions{}};
};

TEST_F(ShardTest, CreatesOnlyItsOwnPiecesInitialized) {
  Init(Create(UpdateConfig::SYNC, 1));
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 1.0f));
  EXPECT_EQ(Pull(shard_, "b"), std::vector<float>(3, 0.5f));
}

TEST_F(ShardTest, CreateIsIdempotentButRefusesAnotherDefinitionOrRun) {
  const CreateVariablesRequest create = Create(UpdateConfig::SYNC, 1);
  Init(create);
  CreateVariablesResponse response;
  EXPECT_TRUE(shard_.CreateVariables(create, &response).ok());
  CreateVariablesRequest other = create;
  other.mutable_optimizer()->set_learning_rate(0.1);
  EXPECT_EQ(shard_.CreateVariables(other, &response).code(),
            absl::StatusCode::kAlreadyExists);
  other = create;
  other.mutable_header()->set_run_id("run-2");
  // The ps's run id is what a caller must know to take part: never told.
  EXPECT_EQ(shard_.CreateVariables(other, &response).message(),
            "ps 0 already belongs to another run");
}

TEST(Shard, CreateRefusesBadRequests) {
  ShardOptions options;
  options.ps_task = 1;
  Shard shard(options);
  CreateVariablesResponse response;
  CreateVariablesRequest create = Create(UpdateConfig::SYNC, 1);
  EXPECT_EQ(shard.CreateVariables(create, &response).message(),
            "request for ps task 0 reached ps task 1");
  create.set_ps_task(1);
  create.mutable_update()->set_replicas_to_aggregate(2);
  EXPECT_EQ(shard.CreateVariables(create, &response).message(),
            "update.replicas_to_aggregate: 2 must be in [0, num_workers 1]");
  create = Create(UpdateConfig::SYNC, 1);
  create.set_ps_task(1);
  create.mutable_variables(0)->mutable_def()->set_dtype(DT_HALF);
  EXPECT_EQ(shard.CreateVariables(create, &response).message(),
            "variable 'w': dtype float16 is not stored yet (only float32)");
  create.mutable_variables(0)->mutable_def()->set_dtype(DT_FLOAT);
  create.mutable_variables(0)->mutable_placement()->mutable_slices(1)->set_row_end(5);
  EXPECT_EQ(shard.CreateVariables(create, &response).message(),
            "variable 'w': placement rows [2, 5) do not fit its 4 rows");
  create.mutable_optimizer()->set_learning_rate(-1);
  EXPECT_EQ(shard.CreateVariables(create, &response).code(),
            absl::StatusCode::kInvalidArgument);
}

// VariableDef.optimizer is for embedding tables, and is checked like the
// run's optimizer, naming the variable.
TEST(Shard, CreateRefusesAnOwnOptimizerOfADenseVariableOrABadOne) {
  Shard shard(ShardOptions{});
  CreateVariablesResponse response;
  CreateVariablesRequest create = Create(UpdateConfig::SYNC, 1);
  OptimizerConfig* own =
      create.mutable_variables(1)->mutable_def()->mutable_optimizer();
  own->mutable_ftrl()->set_learning_rate_power(-0.5f);
  own->mutable_ftrl()->set_initial_accumulator_value(0.1f);
  own->set_learning_rate(0.1);
  EXPECT_EQ(shard.CreateVariables(create, &response).message(),
            "variable 'b': only an embedding table (sparse) has an optimizer "
            "of its own");
  create.mutable_variables(1)->mutable_def()->set_sparse(true);
  create.mutable_variables(1)->mutable_def()->mutable_shape()->add_dims(2);
  own->mutable_ftrl()->set_l1_regularization_strength(-1);
  EXPECT_EQ(shard.CreateVariables(create, &response).message(),
            "variable 'b': optimizer.ftrl.l1_regularization_strength: -1 must "
            "be >= 0");
  own->mutable_ftrl()->set_l1_regularization_strength(0);
  ASSERT_TRUE(shard.CreateVariables(create, &response).ok());
  // w's piece here (rows [0, 2) of 2, SGD: no slots), and b's storage (one
  // block of 1024 rows) of value plus FTRL's two slots, 2 wide.
  EXPECT_EQ(response.num_bytes(), 2 * 2 * 4 + 1024 * 2 * 3 * 4);
}

// Sizes come from the network: a run that would hold more than the shard
// may is refused before anything is allocated, and leaves the shard free
// for a run that fits. A table of 2^40 rows once made `new` throw.
TEST(Shard, CreateRefusesMoreThanMaxBytes) {
  ShardOptions options;
  options.max_bytes = 1 << 20;
  Shard shard(options);
  CreateVariablesResponse response;
  CreateVariablesRequest create = Create(UpdateConfig::SYNC, 1);
  ShardVariable* table = create.add_variables();
  table->mutable_def()->set_name("emb");
  table->mutable_def()->set_dtype(DT_FLOAT);
  table->mutable_def()->set_sparse(true);
  table->mutable_def()->mutable_shape()->add_dims(int64_t{1} << 40);
  table->mutable_def()->mutable_shape()->add_dims(1);
  table->mutable_def()->mutable_initializer()->mutable_zeros();
  table->mutable_placement()->set_name("emb");
  table->mutable_placement()->set_partitioning(VariablePlacement::ROW_RANGES);
  table->mutable_placement()->add_slices()->set_row_end(int64_t{1} << 40);
  const absl::Status refused = shard.CreateVariables(create, &response);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("variable 'emb'"), std::string::npos)
      << refused;
  // A dimension so large that a row's bytes overflow is refused too.
  table->mutable_def()->mutable_shape()->set_dims(1, int64_t{1} << 62);
  table->mutable_placement()->mutable_slices(0)->set_row_end(1);
  table->mutable_def()->mutable_shape()->set_dims(0, 1);
  EXPECT_EQ(shard.CreateVariables(create, &response).code(),
            absl::StatusCode::kResourceExhausted);
  // Nothing was claimed: a run that fits is created.
  EXPECT_TRUE(
      shard.CreateVariables(Create(UpdateConfig::SYNC, 1), &response).ok());
}

TEST_F(ShardTest, SyncAppliesOnceWithTheGlobalBatch) {
  Init(Create(UpdateConfig::SYNC, 2));
  // Worker 0: batch 3, worker 1: batch 5; global batch 8, lr 0.5.
  ASSERT_TRUE(Send(shard_, Push(0, 3, {1, 2, 3, 4}, {8, 0, 0})).ok());
  int64_t version = -1;
  EXPECT_EQ(Pull(shard_, "w", 0, &version), std::vector<float>(4, 1.0f));
  EXPECT_EQ(version, 0);  // not applied until the step is complete
  absl::StatusOr<PushDenseResponse> r =
      Send(shard_, Push(0, 5, {3, 2, 1, 0}, {8, 16, 0}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->applied());
  EXPECT_EQ(r->version(), 1);
  // w -= 0.5 * (sum / 8): sums 4, 4, 4, 4 -> 1 - 0.25.
  EXPECT_EQ(Pull(shard_, "w", 1, &version), std::vector<float>(4, 0.75f));
  EXPECT_EQ(version, 1);
  // b -= 0.5 * ({16, 16, 0} / 8).
  EXPECT_EQ(Pull(shard_, "b", 1), (std::vector<float>{-0.5f, -0.5f, 0.5f}));
}

// A sync run of one worker: each push is a step, divided by its batch.
TEST_F(ShardTest, SyncStepOfOneWorkerAppliesItsPushOverItsBatch) {
  Init(Create(UpdateConfig::SYNC, 1));
  // lr 0.5, batch 4: w -= 0.5 * ({4, 8, 0, -4} / 4).
  ASSERT_TRUE(Send(shard_, Push(0, 4, {4, 8, 0, -4}, {0, 0, 0})).ok());
  EXPECT_EQ(Pull(shard_, "w", 1), (std::vector<float>{0.5f, 0.0f, 1.0f, 1.5f}));
  // The next step holds nothing of this one.
  ASSERT_TRUE(Send(shard_, Push(1, 2, {2, 2, 2, 2}, {0, 0, 0})).ok());
  EXPECT_EQ(Pull(shard_, "w", 2), (std::vector<float>{0.0f, -0.5f, 0.5f, 1.0f}));
}

// A moving average (BatchNormalization's moving statistics) folds in the
// step's average of what the workers pushed instead of taking an SGD step.
TEST_F(ShardTest, SyncMovingAverageFoldsInTheStepsAverage) {
  CreateVariablesRequest create = Create(UpdateConfig::SYNC, 2);
  create.mutable_variables(1)->mutable_def()->mutable_moving_average()
      ->set_momentum(0.75f);
  Init(create);
  // Batch statistics {1, 2, 3} (batch 3) and {5, 6, 7} (batch 5), pushed as
  // sums: their average over the 8 examples is {3.5, 4.5, 5.5}.
  ASSERT_TRUE(Send(shard_, Push(0, 3, {0, 0, 0, 0}, {3, 6, 9})).ok());
  ASSERT_TRUE(Send(shard_, Push(0, 5, {0, 0, 0, 0}, {25, 30, 35})).ok());
  // 0.75 * 0.5 + 0.25 * average.
  EXPECT_EQ(Pull(shard_, "b", 1),
            (std::vector<float>{1.25f, 1.5f, 1.75f}));
  // w still takes the run's SGD (zero gradients: unchanged).
  EXPECT_EQ(Pull(shard_, "w", 1), std::vector<float>(4, 1.0f));

  Shard other{ShardOptions{}};
  CreateVariablesResponse response;
  create.mutable_variables(1)->mutable_def()->mutable_moving_average()
      ->set_momentum(1.0f);
  EXPECT_EQ(other.CreateVariables(create, &response).message(),
            "variable 'b': moving_average.momentum: 1 must be in [0, 1)");
}

TEST_F(ShardTest, BackupWorkersLatePushIsDroppedAndCounted) {
  Init(Create(UpdateConfig::SYNC, 3, /*replicas=*/2));
  ASSERT_TRUE(Send(shard_, Push(0, 1, {2, 2, 2, 2}, {0, 0, 0})).ok());
  ASSERT_TRUE(Send(shard_, Push(0, 1, {2, 2, 2, 2}, {0, 0, 0})).ok());
  // w -= 0.5 * (4 / 2): the first two pushes make the step.
  EXPECT_EQ(Pull(shard_, "w", 1), std::vector<float>(4, 0.0f));
  absl::StatusOr<PushDenseResponse> late =
      Send(shard_, Push(0, 1, {100, 100, 100, 100}, {0, 0, 0}));
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->applied());
  EXPECT_EQ(Pull(shard_, "w", 1), std::vector<float>(4, 0.0f));
  GetShardStatusRequest request;
  request.mutable_header()->set_run_id(kRun);
  ShardStatus status;
  ASSERT_TRUE(shard_.GetShardStatus(request, &status).ok());
  EXPECT_EQ(status.pushes_applied(), 2);
  EXPECT_EQ(status.pushes_dropped_stale(), 1);
  EXPECT_EQ(status.variable_versions().at("w"), 1);
}

TEST_F(ShardTest, IncompleteSyncStepTimesOutWithAClearStatus) {
  CreateVariablesRequest create = Create(UpdateConfig::SYNC, 2);
  create.mutable_update()->set_step_timeout_ms(200);
  Init(create);
  ASSERT_TRUE(Send(shard_, Push(0, 1, {1, 1, 1, 1}, {0, 0, 0})).ok());
  absl::Status status;
  Pull(shard_, "b", 1, nullptr, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            "variable 'b': step 0 did not complete: 1 of 2 gradients arrived "
            "before the deadline (waiting for version 1)");
}

// A push from worker `worker` with request id `id`.
PushDenseRequest From(int worker, uint64_t id, PushDenseRequest push) {
  push.mutable_header()->mutable_sender()->set_job(JOB_WORKER);
  push.mutable_header()->mutable_sender()->set_index(worker);
  push.mutable_header()->set_request_id(id);
  return push;
}

TEST_F(ShardTest, SyncCountsAWorkersGradientOncePerStep) {
  Init(Create(UpdateConfig::SYNC, 2));
  // Worker 0 pushes step 0 twice (a retry, or a restarted worker redoing
  // the step with a new request id): the step still waits for worker 1.
  ASSERT_TRUE(Send(shard_, From(0, 1, Push(0, 1, {2, 2, 2, 2}, {0, 0, 0}))).ok());
  absl::StatusOr<PushDenseResponse> again =
      Send(shard_, From(0, 7, Push(0, 1, {2, 2, 2, 2}, {0, 0, 0})));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->applied());
  int64_t version = -1;
  Pull(shard_, "w", 0, &version);
  EXPECT_EQ(version, 0);
  ASSERT_TRUE(Send(shard_, From(1, 1, Push(0, 1, {2, 2, 2, 2}, {0, 0, 0}))).ok());
  // w -= 0.5 * (4 / 2): one gradient of each worker.
  EXPECT_EQ(Pull(shard_, "w", 1, &version), std::vector<float>(4, 0.0f));
  EXPECT_EQ(version, 1);
}

TEST_F(ShardTest, SetWorkersCompletesThePendingStepAndRefusesAbsentWorkers) {
  Init(Create(UpdateConfig::SYNC, 3));
  ASSERT_TRUE(Send(shard_, From(0, 1, Push(0, 1, {2, 2, 2, 2}, {0, 0, 0}))).ok());
  ASSERT_TRUE(Send(shard_, From(2, 1, Push(0, 1, {2, 2, 2, 2}, {0, 0, 0}))).ok());
  // Worker 1 is gone: the step applies with the two gradients it has.
  SetWorkersRequest request;
  request.mutable_header()->set_run_id(kRun);
  request.set_replicas_to_aggregate(2);
  request.add_absent_workers(1);
  SetWorkersResponse response;
  ASSERT_TRUE(shard_.SetWorkers(request, &response).ok());
  EXPECT_EQ(response.version(), 1);
  EXPECT_EQ(Pull(shard_, "w", 1), std::vector<float>(4, 0.0f));
  ExpectRefused(From(1, 2, Push(1, 1, {1, 1, 1, 1}, {0, 0, 0})),
                absl::StatusCode::kAborted, "worker 1 was presumed dead");
  // Step 1 now waits for two gradients.
  ASSERT_TRUE(Send(shard_, From(0, 3, Push(1, 1, {1, 1, 1, 1}, {0, 0, 0}))).ok());
  int64_t version = -1;
  Pull(shard_, "w", 0, &version);
  EXPECT_EQ(version, 1);
  request.set_replicas_to_aggregate(4);
  EXPECT_EQ(shard_.SetWorkers(request, &response).code(),
            absl::StatusCode::kInvalidArgument);
}

// With count_batches, the shard counts each global batch as applied: a
// retried push, or one dropped as late, adds nothing.
TEST(Shard, CountsEachBatchAsItIsApplied) {
  ShardOptions options;
  options.count_batches = true;
  Shard shard(options);
  CreateVariablesResponse created;
  ASSERT_TRUE(
      shard.CreateVariables(Create(UpdateConfig::SYNC, 2), &created).ok());
  auto batch = [](int64_t b, PushDenseRequest push) {
    push.mutable_header()->add_batches(b);
    return push;
  };
  const PushDenseRequest from_0 =
      batch(0, From(0, 1, Push(0, 1, {1, 1, 1, 1}, {0, 0, 0})));
  ASSERT_TRUE(Send(shard, from_0).ok());
  ASSERT_TRUE(Send(shard, from_0).ok());  // a retry
  ASSERT_TRUE(
      Send(shard, batch(1, From(1, 1, Push(0, 1, {1, 1, 1, 1}, {0, 0, 0}))))
          .ok());
  // Step 0 is complete: a push of it now is late.
  absl::StatusOr<PushDenseResponse> late =
      Send(shard, batch(0, From(0, 9, Push(0, 1, {1, 1, 1, 1}, {0, 0, 0}))));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_FALSE(late->applied());
  EXPECT_EQ(shard.BatchesApplied(), (std::map<int64_t, int>{{0, 1}, {1, 1}}));
}

// Under --on_worker_failure=continue, worker 2 of 3 pushed step 0 to ps A
// but not to ps B, then was presumed dead. A keeps its gradient and still
// waits for worker 1; the worker covering for it pushes batch 2 again as
// owed, which A (holding it) skips and B adds. Every batch counts once on
// each ps.
TEST(Shard, AnAbsentWorkersPartialPushCountsOnceOnEveryPs) {
  ShardOptions options;
  options.count_batches = true;
  Shard a(options), b(options);
  CreateVariablesResponse created;
  for (Shard* ps : {&a, &b}) {
    ASSERT_TRUE(
        ps->CreateVariables(Create(UpdateConfig::SYNC, 3), &created).ok());
  }
  // Worker `worker`'s push of `batches` at `version`, `owed` or its own:
  // one example each, whose gradient is 1.
  auto push = [](int worker, uint64_t id, int64_t version,
                 std::vector<int64_t> batches, bool owed = false) {
    const float n = batches.size();
    PushDenseRequest p = From(
        worker, id, Push(version, batches.size(), {n, n, n, n}, {0, 0, 0}));
    for (int64_t batch : batches) p.mutable_header()->add_batches(batch);
    p.mutable_header()->set_owed(owed);
    return p;
  };
  ASSERT_TRUE(Send(a, push(2, 1, 0, {2})).ok());
  for (Shard* ps : {&a, &b}) ASSERT_TRUE(Send(*ps, push(0, 1, 0, {0})).ok());
  SetWorkersRequest request;
  request.mutable_header()->set_run_id(kRun);
  request.set_replicas_to_aggregate(2);
  request.add_absent_workers(2);
  SetWorkersResponse response;
  for (Shard* ps : {&a, &b}) {
    ASSERT_TRUE(ps->SetWorkers(request, &response).ok());
    EXPECT_EQ(response.version(), 0) << "step 0 still waits for worker 1";
  }
  for (Shard* ps : {&a, &b}) {
    absl::StatusOr<PushDenseResponse> r = Send(*ps, push(1, 1, 0, {1}));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->applied());
  }
  // Both applied a mean gradient of 1 (A over 3 examples, B over 2).
  EXPECT_EQ(Pull(a, "w", 1), std::vector<float>(4, 0.5f));
  EXPECT_EQ(Pull(b, "w", 1), std::vector<float>(4, 0.5f));
  // Step 1: worker 0 covers worker 2: batch 2 owed, then its own push with
  // worker 2's batch of step 1 (5); worker 1's own.
  for (Shard* ps : {&a, &b}) {
    ASSERT_TRUE(Send(*ps, push(0, 2, 1, {2}, /*owed=*/true)).ok());
    ASSERT_TRUE(Send(*ps, push(0, 2, 1, {2}, /*owed=*/true)).ok());  // retry
    ASSERT_TRUE(Send(*ps, push(0, 3, 1, {3, 5})).ok());
    ASSERT_TRUE(Send(*ps, push(1, 2, 1, {4})).ok());
  }
  const std::map<int64_t, int> once = {{0, 1}, {1, 1}, {2, 1},
                                       {3, 1}, {4, 1}, {5, 1}};
  EXPECT_EQ(a.BatchesApplied(), once);
  EXPECT_EQ(b.BatchesApplied(), once);
  // A: batches 3, 4, 5; B: 2 too. The mean gradient is 1 either way.
  EXPECT_EQ(Pull(a, "w", 2), std::vector<float>(4, 0.0f));
  EXPECT_EQ(Pull(b, "w", 2), std::vector<float>(4, 0.0f));
  // Worker 2's own pushes are refused, owed pushes only in sync mode from
  // a worker.
  EXPECT_EQ(Send(a, push(2, 9, 2, {8})).status().code(),
            absl::StatusCode::kAborted);
  PushDenseRequest unnamed = push(0, 4, 2, {6}, true);
  unnamed.mutable_header()->clear_sender();
  EXPECT_EQ(Send(a, unnamed).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A ps task that holds no variables collects no step: it answers -1, so
// that the chief does not take step 0 for the step the cluster is stuck at.
TEST(Shard, SetWorkersOnAShardWithoutVariablesCollectsNoStep) {
  ShardOptions options;
  options.ps_task = 5;
  Shard shard(options);
  CreateVariablesRequest create = Create(UpdateConfig::SYNC, 3);
  create.set_ps_task(5);
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  ASSERT_EQ(created.num_variables(), 0);
  SetWorkersRequest request;
  request.mutable_header()->set_run_id(kRun);
  request.set_replicas_to_aggregate(2);
  request.add_absent_workers(1);
  SetWorkersResponse response;
  ASSERT_TRUE(shard.SetWorkers(request, &response).ok());
  EXPECT_EQ(response.version(), -1);
}

TEST_F(ShardTest, AsyncAppliesARetriedPushOnce) {
  Init(Create(UpdateConfig::ASYNC, 2));
  const PushDenseRequest push = From(1, 42, Push(0, 2, {1, 1, 1, 1}, {0, 0, 0}));
  absl::StatusOr<PushDenseResponse> first = Send(shard_, push);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<PushDenseResponse> retried = Send(shard_, push);
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried->version(), first->version());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.75f));
  // Another request id is another gradient.
  ASSERT_TRUE(
      Send(shard_, From(1, 43, Push(1, 2, {1, 1, 1, 1}, {0, 0, 0}))).ok());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.5f));
}

// A worker's push of a step counts once in async mode too: the step redone
// (by a restarted worker, or after another ps task failed its push) comes
// with a new request id but the same step, and is answered from the record
// without being applied.
TEST_F(ShardTest, AsyncAppliesAWorkersPushOfAStepOnce) {
  Init(Create(UpdateConfig::ASYNC, 2));
  auto at_step = [](int64_t step, PushDenseRequest push) {
    push.mutable_header()->set_step(step);
    return push;
  };
  absl::StatusOr<PushDenseResponse> first = Send(
      shard_, at_step(5, From(1, 42, Push(0, 2, {1, 1, 1, 1}, {0, 0, 0}))));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.75f));
  absl::StatusOr<PushDenseResponse> redone = Send(
      shard_, at_step(5, From(1, 77, Push(1, 2, {1, 1, 1, 1}, {0, 0, 0}))));
  ASSERT_TRUE(redone.ok()) << redone.status();
  EXPECT_EQ(redone->version(), first->version());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.75f));
  // Another worker's step 5, and this worker's step 6, are other pushes.
  ASSERT_TRUE(
      Send(shard_, at_step(5, From(0, 77, Push(1, 2, {1, 1, 1, 1}, {0, 0, 0}))))
          .ok());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.5f));
  ASSERT_TRUE(
      Send(shard_, at_step(6, From(1, 78, Push(2, 2, {1, 1, 1, 1}, {0, 0, 0}))))
          .ok());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.25f));
}

TEST(Shard, GradientsCutAnywhereApplyAsWhole) {
  const PushDenseRequest push = Push(0, 2, {1.5, -2, 3.25, 4}, {0.5, 1, -1});
  for (UpdateConfig::Mode mode : {UpdateConfig::ASYNC, UpdateConfig::SYNC}) {
    Shard whole(ShardOptions{});
    CreateVariablesResponse response;
    ASSERT_TRUE(whole.CreateVariables(Create(mode, 1), &response).ok());
    ASSERT_TRUE(Send(whole, push).ok());
    ASSERT_NE(Pull(whole, "w"), std::vector<float>(4, 1.0f));
    for (size_t cut : {1, 3, 5, 6, 16}) {
      Shard shard(ShardOptions{});
      ASSERT_TRUE(shard.CreateVariables(Create(mode, 1), &response).ok());
      std::string storage;
      const PushDenseView view = CutContents(push, cut, &storage);
      const PushDenseView* views[] = {&view};
      ASSERT_TRUE(shard.PushDense(views).ok()) << cut;
      EXPECT_EQ(Pull(shard, "w"), Pull(whole, "w")) << cut;
      EXPECT_EQ(Pull(shard, "b"), Pull(whole, "b")) << cut;
    }
  }
  // A NaN split between two pieces is found.
  Shard shard(ShardOptions{});
  CreateVariablesResponse response;
  ASSERT_TRUE(shard.CreateVariables(Create(UpdateConfig::ASYNC, 1), &response).ok());
  std::string storage;
  const PushDenseView view =
      CutContents(Push(0, 1, {1, NAN, 1, 1}, {0, 0, 0}), 3, &storage);
  const PushDenseView* views[] = {&view};
  EXPECT_EQ(shard.PushDense(views).status().message(),
            "variable 'w': gradient element 1 is NaN (nan_policy NAN_REJECT)");
  EXPECT_EQ(Pull(shard, "w"), std::vector<float>(4, 1.0f));
}

TEST(Shard, AsyncLargeVariableGetsTheOptimizersUpdate) {
  // 15000 floats: more than one of the blocks the ps applies at a time.
  CreateVariablesRequest create;
  create.mutable_header()->set_run_id(kRun);
  OptimizerConfig* adam = create.mutable_optimizer();
  adam->mutable_adam()->set_beta_1(0.9);
  adam->mutable_adam()->set_beta_2(0.999);
  adam->mutable_adam()->set_epsilon(1e-7);
  adam->set_learning_rate(0.01);
  create.mutable_update()->set_mode(UpdateConfig::ASYNC);
  create.mutable_update()->set_num_workers(1);
  create.mutable_update()->set_max_staleness(-1);
  ShardVariable* v = create.add_variables();
  v->mutable_def()->set_name("big");
  v->mutable_def()->set_dtype(DT_FLOAT);
  v->mutable_def()->mutable_shape()->add_dims(3);
  v->mutable_def()->mutable_shape()->add_dims(5000);
  v->mutable_def()->mutable_initializer()->mutable_constant()->set_value(0.25);
  v->mutable_placement()->set_name("big");
  v->mutable_placement()->set_partitioning(VariablePlacement::WHOLE);
  v->mutable_placement()->add_slices()->set_row_end(3);
  Shard shard(ShardOptions{});
  CreateVariablesResponse response;
  ASSERT_TRUE(shard.CreateVariables(create, &response).ok());

  std::vector<float> sums(15000), mean(15000);
  for (size_t i = 0; i < sums.size(); ++i) {
    mean[i] = std::sin(static_cast<float>(i + 1));
    sums[i] = 4 * mean[i];
  }
  std::vector<float> w(15000, 0.25f), m(15000), v2(15000);
  std::unique_ptr<Optimizer> optimizer = *CreateOptimizer(*adam);
  for (int t = 1; t <= 2; ++t) {
    PushDenseRequest push;
    push.mutable_header()->set_run_id(kRun);
    push.set_version(t - 1);
    push.set_batch_size(4);
    NamedTensor* g = push.add_gradients();
    g->set_name("big");
    g->mutable_tensor()->set_dtype(DT_FLOAT);
    g->mutable_tensor()->mutable_shape()->add_dims(3);
    g->mutable_tensor()->mutable_shape()->add_dims(5000);
    g->mutable_tensor()->set_content(sums.data(), sums.size() * 4);
    // At t = 2 a pull holds the value while the push applies: the update
    // goes to a copy, the held value stays as read.
    ValueView held;
    if (t == 2) {
      PullDenseRequest pull;
      pull.mutable_header()->set_run_id(kRun);
      pull.add_names("big");
      ASSERT_TRUE(
          shard
              .PullDense(pull,
                         [&held](const DenseVariable&, const ValueView& value) {
                           held = value;
                         })
              .ok());
      ASSERT_NE(held.owner, nullptr);
    }
    ASSERT_TRUE(Send(shard, push).ok());
    if (t == 2) {
      std::vector<float> read(w.size());
      ASSERT_EQ(held.size, static_cast<int64_t>(read.size() * 4));
      std::memcpy(read.data(), held.data, held.size);
      EXPECT_EQ(read, w);
    }
    float* slots[] = {m.data(), v2.data()};
    optimizer->Apply(absl::MakeSpan(w), mean, slots, t);
  }
  EXPECT_EQ(Pull(shard, "big"), w);
}

TEST_F(ShardTest, ALentValueStaysAsReadWhileHeld) {
  Init(Create(UpdateConfig::ASYNC, 1));
  PullDenseRequest pull;
  pull.mutable_header()->set_run_id(kRun);
  pull.add_names("w");
  ValueView held;
  ASSERT_TRUE(shard_
                  .PullDense(pull, [&held](const DenseVariable&,
                                           const ValueView& value) {
                    held = value;
                  })
                  .ok());
  ASSERT_NE(held.owner, nullptr);  // a small piece is lent
  ASSERT_TRUE(Send(shard_, Push(0, 1, {1, 1, 1, 1}, {0, 0, 0})).ok());
  std::vector<float> read(4);
  std::memcpy(read.data(), held.data, held.size);
  EXPECT_EQ(read, std::vector<float>(4, 1.0f));
  EXPECT_EQ(held.version, 0);
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.5f));
  // Let go, the value is updated in place again.
  held = ValueView();
  ASSERT_TRUE(Send(shard_, Push(1, 1, {1, 1, 1, 1}, {0, 0, 0})).ok());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.0f));
}

TEST_F(ShardTest, AsyncAnswersARetryFromTheRecordThoughItIsNowStale) {
  Init(Create(UpdateConfig::ASYNC, 2, 0, /*staleness=*/0));
  const PushDenseRequest push = From(1, 42, Push(0, 2, {1, 1, 1, 1}, {0, 0, 0}));
  absl::StatusOr<PushDenseResponse> first = Send(shard_, push);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(Send(shard_, From(0, 7, Push(1, 2, {1, 1, 1, 1}, {0, 0, 0}))).ok());
  // A new push computed from version 0 is beyond the bound now...
  ExpectRefused(From(1, 43, Push(0, 2, {1, 1, 1, 1}, {0, 0, 0})),
                absl::StatusCode::kFailedPrecondition, "stale");
  // ...but the retry of one applied then gets its answer, and is not
  // applied again.
  absl::StatusOr<PushDenseResponse> retried = Send(shard_, push);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->version(), first->version());
  EXPECT_TRUE(retried->applied());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.5f));
}

TEST_F(ShardTest, RequestsOfAnotherGenerationAreAborted) {
  Init(Create(UpdateConfig::SYNC, 1));
  PushDenseRequest push = Push(0, 1, {1, 1, 1, 1}, {0, 0, 0});
  push.mutable_header()->set_generation(3);
  ExpectRefused(push, absl::StatusCode::kAborted,
                "request of generation 3, but ps 0 serves generation 0");
  PullDenseRequest pull;
  pull.mutable_header()->set_run_id(kRun);
  pull.mutable_header()->set_generation(1);
  absl::Status status = shard_.PullDense(
      pull, [](const DenseVariable&, const ValueView&) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
}

TEST_F(ShardTest, AsyncAppliesEachPushWithItsOwnBatch) {
  Init(Create(UpdateConfig::ASYNC, 2));
  absl::StatusOr<PushDenseResponse> r =
      Send(shard_, Push(0, 2, {1, 1, 1, 1}, {0, 0, 0}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->version(), 1);
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.75f));
  ASSERT_TRUE(Send(shard_, Push(0, 1, {1, 1, 1, 1}, {0, 0, 0})).ok());
  EXPECT_EQ(Pull(shard_, "w"), std::vector<float>(4, 0.25f));
}

TEST_F(ShardTest, AsyncRefusesPushesBeyondTheStalenessBound) {
  Init(Create(UpdateConfig::ASYNC, 2, 0, /*staleness=*/1));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(Send(shard_, Push(i, 1, {0, 0, 0, 0}, {0, 0, 0})).ok());
  }
  ExpectRefused(Push(0, 1, {1, 1, 1, 1}, {0, 0, 0}),
                absl::StatusCode::kFailedPrecondition,
                "gradient computed from version 0 is too stale: the variable "
                "is at version 2, beyond 0 + max_staleness 1");
  EXPECT_TRUE(Send(shard_, Push(1, 1, {0, 0, 0, 0}, {0, 0, 0})).ok());
}

TEST_F(ShardTest, RefusesBadPushesWithoutChangingAnything) {
  Init(Create(UpdateConfig::ASYNC, 1));
  PushDenseRequest p = Push(0, 1, {1, 1, 1, 1}, {1, 1, 1});
  p.mutable_header()->set_run_id("old-run");
  ExpectRefused(p, absl::StatusCode::kFailedPrecondition,
                "the request's run id is not the run of ps 0");

  p = Push(0, 0, {1, 1, 1, 1}, {1, 1, 1});
  ExpectRefused(p, absl::StatusCode::kInvalidArgument, "batch_size 0 must be > 0");

  p = Push(0, 1, {1, 1, 1, 1}, {1, 1, 1});
  p.mutable_gradients(1)->set_name("c");
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'c': not held by ps 0");

  p = Push(0, 1, {1, 1, 1, 1}, {1, 1, 1});
  p.mutable_gradients(1)->mutable_tensor()->set_dtype(DT_DOUBLE);
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'b': gradient dtype float64, expected float32");

  p = Push(0, 1, {1, 1, 1, 1}, {1, 1, 1});
  p.mutable_gradients(1)->mutable_tensor()->mutable_shape()->set_dims(0, 4);
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'b': gradient shape [4] does not match the "
                "variable's [3]");

  p = Push(0, 1, {1, 1, 1, 1}, {1, 1, 1});
  p.mutable_gradients(0)->mutable_tensor()->mutable_slice()->set_begin(2);
  p.mutable_gradients(0)->mutable_tensor()->mutable_slice()->set_end(4);
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'w': gradient rows [2, 4) but ps 0 holds rows [0, 2)");

  p = Push(0, 1, {1, 1, 1, 1}, {1, 1});  // b short by one float
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'b': gradient chunks cover 8 of its 12 bytes");

  p = Push(0, 1, {1, 1, 1, 1}, {1, 1, 1});
  *p.add_gradients() = Gradient("b", {3}, {1}, /*offset=*/2);  // overlap
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'b': gradient chunks overlap or leave a gap: a chunk "
                "starts at byte 8, expected byte 12");

  p = Push(0, 1, {1, 1, 1, 1}, {1, 1, 1});
  p.mutable_gradients(1)->mutable_tensor()->set_content_offset(8);
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'b': gradient chunk of 12 bytes at offset 8 does not "
                "fit its 12 bytes in whole floats");

  p = Push(5, 1, {1, 1, 1, 1}, {1, 1, 1});
  ExpectRefused(p, absl::StatusCode::kAborted,
                "gradient computed from version 5, but the variable is at "
                "version 0 (a version from the future: was this ps "
                "restarted?)");

  p = Push(0, 1, {1, 1, NAN, 1}, {1, 1, 1});
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'w': gradient element 2 is NaN (nan_policy NAN_REJECT)");
  p = Push(0, 1, {1, 1, 1, 1}, {1, INFINITY, 1});
  ExpectRefused(p, absl::StatusCode::kInvalidArgument,
                "variable 'b': gradient element 1 is Inf");

  GetShardStatusRequest request;
  request.mutable_header()->set_run_id(kRun);
  ShardStatus status;
  ASSERT_TRUE(shard_.GetShardStatus(request, &status).ok());
  EXPECT_EQ(status.pushes_refused(), 12);
  EXPECT_EQ(status.pushes_applied(), 0);
}

TEST(Shard, NanSkipStepVoidsTheSyncStepButAdvancesIt) {
  ShardOptions options;
  options.nan_policy = NAN_SKIP_STEP;
  Shard shard(options);
  CreateVariablesResponse response;
  ASSERT_TRUE(shard.CreateVariables(Create(UpdateConfig::SYNC, 2), &response).ok());
  ASSERT_TRUE(Send(shard, Push(0, 1, {1, 1, 1, 1}, {1, 1, 1})).ok());
  ASSERT_TRUE(Send(shard, Push(0, 1, {NAN, 1, 1, 1}, {1, 1, 1})).ok());
  int64_t version = 0;
  EXPECT_EQ(Pull(shard, "w", 1, &version), std::vector<float>(4, 1.0f));
  EXPECT_EQ(version, 1);
}

TEST(Shard, NanAbortCallsTheAbortHandler) {
  absl::Status seen;
  ShardOptions options;
  options.nan_policy = NAN_ABORT;
  options.on_abort = [&](const absl::Status& s) { seen = s; };
  Shard shard(options);
  CreateVariablesResponse response;
  ASSERT_TRUE(shard.CreateVariables(Create(UpdateConfig::ASYNC, 1), &response).ok());
  EXPECT_FALSE(Send(shard, Push(0, 1, {1, 1, 1, 1}, {1, NAN, 1})).ok());
  EXPECT_EQ(seen.message(),
            "variable 'b': gradient element 1 is NaN (nan_policy NAN_ABORT)");
}

TEST(Shard, RequestsBeforeCreateAreRefused) {
  Shard shard{ShardOptions{}};
  absl::Status status;
  Pull(shard, "w", 0, nullptr, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            "ps 0 has no variables yet (the chief has not created them)");
}

// 8 workers push concurrently for 5 sync steps; the result equals the serial
// computation exactly (the gradients are small integers, so every order of
// summation gives the same floats).
TEST_F(ShardTest, ConcurrentSyncPushesEqualTheSerialResult) {
  constexpr int kWorkers = 8, kSteps = 5;
  Init(Create(UpdateConfig::SYNC, kWorkers));
  std::vector<std::thread> threads;
  for (int worker = 0; worker < kWorkers; ++worker) {
    threads.emplace_back([this, worker] {
      for (int step = 0; step < kSteps; ++step) {
        // As a worker does: every variable it pushes to is pulled first.
        Pull(shard_, "w", step);
        Pull(shard_, "b", step);
        const float g = worker + step;
        absl::StatusOr<PushDenseResponse> r =
            Send(shard_, Push(step, 2, {g, g, g, g}, {g, 0, 0}));
        ASSERT_TRUE(r.ok()) << r.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Serial: each step sums (0..7) + 8 * step = 28 + 8 step over batch 16.
  double w = 1.0;
  for (int step = 0; step < kSteps; ++step) w -= 0.5 * (28 + 8 * step) / 16.0;
  int64_t version = 0;
  EXPECT_EQ(Pull(shard_, "w", kSteps, &version),
            std::vector<float>(4, static_cast<float>(w)));
  EXPECT_EQ(version, kSteps);
}

// 8 threads push async SGD updates of known size; none is lost.
TEST_F(ShardTest, ConcurrentAsyncPushesLoseNoUpdate) {
  constexpr int kThreads = 8, kPushes = 200;
  Init(Create(UpdateConfig::ASYNC, kThreads));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([this] {
      for (int k = 0; k < kPushes; ++k) {
        // lr 0.5 * g 0.25 / batch 1: each push lowers b by exactly 1/8.
        ASSERT_TRUE(Send(shard_, Push(0, 1, {0, 0, 0, 0}, {0.25f, 0, 0})).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t version = 0;
  const std::vector<float> b = Pull(shard_, "b", 0, &version);
  EXPECT_EQ(b[0], 0.5f - kThreads * kPushes / 8.0f);
  EXPECT_EQ(version, kThreads * kPushes);
}

// Embedding tables: "emb" grows on first touch, hashed over 2 ps tasks (this
// is bucket 0: even ids); "vocab" has 6 rows, rows [0, 3) here.
CreateVariablesRequest CreateSparse(UpdateConfig::Mode mode, int workers) {
  CreateVariablesRequest r = Create(mode, workers);
  r.clear_variables();
  ShardVariable* emb = r.add_variables();
  emb->mutable_def()->set_name("emb");
  emb->mutable_def()->set_dtype(DT_FLOAT);
  emb->mutable_def()->set_sparse(true);
  emb->mutable_def()->mutable_shape()->add_dims(0);
  emb->mutable_def()->mutable_shape()->add_dims(2);
  emb->mutable_def()->mutable_initializer()->mutable_constant()->set_value(1);
  emb->mutable_placement()->set_name("emb");
  emb->mutable_placement()->set_partitioning(VariablePlacement::ROW_HASH);
  emb->mutable_placement()->add_slices()->set_ps_task(0);
  emb->mutable_placement()->add_slices()->set_ps_task(1);
  ShardVariable* vocab = r.add_variables();
  *vocab = *emb;
  vocab->mutable_def()->set_name("vocab");
  vocab->mutable_def()->mutable_shape()->set_dims(0, 6);
  vocab->mutable_placement()->set_name("vocab");
  vocab->mutable_placement()->set_partitioning(VariablePlacement::ROW_RANGES);
  vocab->mutable_placement()->mutable_slices(0)->set_row_end(3);
  vocab->mutable_placement()->mutable_slices(1)->set_row_begin(3);
  vocab->mutable_placement()->mutable_slices(1)->set_row_end(6);
  return r;
}

PullSparseRequest SparsePull(const std::string& name, std::vector<int64_t> ids,
                             int64_t min_version = 0) {
  PullSparseRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_name(name);
  for (int64_t id : ids) r.add_ids(id);
  r.set_min_version(min_version);
  return r;
}

PushSparseRequest SparsePush(const std::string& name, std::vector<int64_t> ids,
                             const std::vector<float>& rows,
                             int64_t version = 0, int64_t batch = 1) {
  PushSparseRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_name(name);
  for (int64_t id : ids) r.add_ids(id);
  r.mutable_gradients()->set_dtype(DT_FLOAT);
  r.mutable_gradients()->mutable_shape()->add_dims(ids.size());
  r.mutable_gradients()->mutable_shape()->add_dims(2);
  r.mutable_gradients()->set_content(rows.data(), rows.size() * 4);
  r.set_version(version);
  r.set_batch_size(batch);
  return r;
}

std::vector<float> Rows(const PullSparseResponse& r) {
  std::vector<float> v(r.values().content().size() / 4);
  std::memcpy(v.data(), r.values().content().data(), v.size() * 4);
  return v;
}

TEST_F(ShardTest, APullServesANameGivenTwiceOnceAndKnowsItsDenseBytes) {
  EXPECT_EQ(shard_.DenseBytes(), 0);
  Init(Create(UpdateConfig::ASYNC, 1));
  EXPECT_EQ(shard_.DenseBytes(), (4 + 3) * 4);  // ps 0's rows of w, and b
  PullDenseRequest r;
  r.mutable_header()->set_run_id(kRun);
  for (const char* name : {"b", "w", "b", "w", "w"}) r.add_names(name);
  std::vector<std::string> served;
  ASSERT_TRUE(shard_
                  .PullDense(r,
                             [&](const DenseVariable& v, const ValueView&) {
                               served.push_back(v.name());
                             })
                  .ok());
  EXPECT_EQ(served, (std::vector<std::string>{"b", "w"}));
}

TEST(ShardSparse, PullAnswersEveryIdInOrderAndCreatesRowsOnFirstTouch) {
  Shard shard{ShardOptions()};
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(CreateSparse(UpdateConfig::ASYNC, 1), &created).ok());
  PullSparseResponse r;
  ASSERT_TRUE(shard.PullSparse(SparsePull("emb", {8, 4, 8, 1000000}), &r).ok());
  EXPECT_EQ(r.values().shape().dims(0), 4);
  EXPECT_EQ(r.values().shape().dims(1), 2);
  EXPECT_EQ(Rows(r), std::vector<float>(8, 1.0f));
  // Three rows were created: 8 once, though asked for twice.
  GetShardStatusRequest request;
  request.mutable_header()->set_run_id(kRun);
  ShardStatus status;
  ASSERT_TRUE(shard.GetShardStatus(request, &status).ok());
  EXPECT_EQ(status.embedding_tables().at("emb").rows(), 3);
}

TEST(ShardSparse, PushSumsDuplicatesAndUpdatesOnlyTouchedRows) {
  // Async sums a push's duplicates before its update; a sync step sums them
  // with the step's other rows.
  for (UpdateConfig::Mode mode : {UpdateConfig::ASYNC, UpdateConfig::SYNC}) {
    SCOPED_TRACE(UpdateConfig::Mode_Name(mode));
    Shard shard{ShardOptions()};
    CreateVariablesResponse created;
    ASSERT_TRUE(shard.CreateVariables(CreateSparse(mode, 1), &created).ok());
    PullSparseResponse before;
    ASSERT_TRUE(shard.PullSparse(SparsePull("emb", {2}), &before).ok());
    PushSparseResponse pushed;
    // id 4 twice: its gradient is (1 + 3, 2 + 2); lr 0.5, batch 2.
    ASSERT_TRUE(shard
                    .PushSparse(SparsePush("emb", {4, 6, 4},
                                           {1, 2, 0, 4, 3, 2}, 0, 2),
                                &pushed)
                    .ok());
    EXPECT_EQ(pushed.version(), 1);
    PullSparseResponse after;
    ASSERT_TRUE(shard.PullSparse(SparsePull("emb", {4, 6, 2}), &after).ok());
    EXPECT_EQ(Rows(after),
              (std::vector<float>{0.0f, 0.0f, 1.0f, 0.0f, 1.0f, 1.0f}));
    EXPECT_EQ(after.version(), 1);
  }
}

TEST(ShardSparse, SyncAppliesOnceAllWorkersPushed) {
  Shard shard{ShardOptions()};
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(CreateSparse(UpdateConfig::SYNC, 2), &created).ok());
  PushSparseResponse r;
  ASSERT_TRUE(shard.PushSparse(SparsePush("vocab", {1}, {2, 2}, 0, 1), &r).ok());
  PullSparseResponse pulled;
  ASSERT_TRUE(shard.PullSparse(SparsePull("vocab", {1}), &pulled).ok());
  EXPECT_EQ(Rows(pulled), (std::vector<float>{1.0f, 1.0f}));
  ASSERT_TRUE(shard.PushSparse(SparsePush("vocab", {1, 2}, {2, 2, 4, 0}, 0, 3), &r).ok());
  ASSERT_TRUE(shard.PullSparse(SparsePull("vocab", {1, 2}, 1), &pulled).ok());
  // Sums (4, 4) and (4, 0) over the global batch 4, lr 0.5.
  EXPECT_EQ(Rows(pulled), (std::vector<float>{0.5f, 0.5f, 0.5f, 1.0f}));
  ASSERT_FALSE(shard.PushSparse(SparsePush("vocab", {1}, {2, 2}, 0, 1), &r).ok() &&
               r.applied());
}

// In float, 1e8 + 1 - 1e8 is 0 and 1e8 - 1e8 + 1 is 1: a step's sum of three
// pushes must not depend on the order in which they come.
TEST(Shard, SyncSumsDoNotDependOnTheOrderOfPushes) {
  const float big = 1e8f;
  for (const std::vector<float>& order :
       {std::vector<float>{big, -big, 1}, std::vector<float>{big, 1, -big}}) {
    Shard shard{ShardOptions()};
    CreateVariablesRequest create = Create(UpdateConfig::SYNC, 3);
    const CreateVariablesRequest sparse = CreateSparse(UpdateConfig::SYNC, 3);
    for (const ShardVariable& v : sparse.variables()) {
      *create.add_variables() = v;
    }
    CreateVariablesResponse created;
    ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
    PushSparseResponse pushed;
    for (const float g : order) {
      ASSERT_TRUE(Send(shard, Push(0, 1, {g, g, g, g}, {g, 0, 0})).ok());
      ASSERT_TRUE(
          shard.PushSparse(SparsePush("vocab", {1}, {g, g}, 0, 1), &pushed)
              .ok());
    }
    // Every sum is 1, over the global batch 3, lr 0.5.
    const float expected_w = 1.0f - 0.5f * (1.0f / 3.0f);
    EXPECT_EQ(Pull(shard, "w", 1), std::vector<float>(4, expected_w));
    PullSparseResponse pulled;
    ASSERT_TRUE(shard.PullSparse(SparsePull("vocab", {1}, 1), &pulled).ok());
    EXPECT_EQ(Rows(pulled), std::vector<float>(2, expected_w));
  }
}

TEST(ShardSparse, RefusesBadIdsAndGradientsWithoutChangingAnything) {
  Shard shard{ShardOptions()};
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(CreateSparse(UpdateConfig::ASYNC, 1), &created).ok());
  PushSparseResponse r;
  EXPECT_EQ(shard.PushSparse(SparsePush("emb", {3}, {1, 1}), &r).message(),
            "variable 'emb': id 3 belongs to bucket 1 of 2, not this ps's bucket 0");
  EXPECT_EQ(shard.PushSparse(SparsePush("emb", {-2}, {1, 1}), &r).message(),
            "variable 'emb': id -2 is negative");
  const absl::Status vocabulary =
      shard.PushSparse(SparsePush("vocab", {6}, {1, 1}), &r);
  EXPECT_EQ(vocabulary.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(vocabulary.message(),
            "variable 'vocab': id 6 is outside the vocabulary of 6 rows");
  EXPECT_EQ(shard.PushSparse(SparsePush("vocab", {4}, {1, 1}), &r).message(),
            "variable 'vocab': id 4 is outside rows [0, 3) held by this ps");
  EXPECT_EQ(shard.PushSparse(SparsePush("emb", {2, 4}, {1, 1}), &r).message(),
            "variable 'emb': row gradients must be float32 [2, 2] in one piece; "
            "got float32 [2, 2] with 8 bytes");
  EXPECT_EQ(shard.PushSparse(SparsePush("emb", {2}, {1, NAN}), &r).message(),
            "variable 'emb': gradient element 1 is NaN (nan_policy NAN_REJECT)");
  EXPECT_EQ(shard.PushSparse(SparsePush("w", {0}, {1, 1}), &r).message(),
            "variable 'w': not an embedding table held by ps 0");
  EXPECT_EQ(shard.PushSparse(SparsePush("emb", {2}, {1, 1}, 3), &r).message(),
            "variable 'emb': gradient computed from version 3, but the variable "
            "is at version 0 (a version from the future: was this ps "
            "restarted?)");
  PullSparseResponse pulled;
  ASSERT_TRUE(shard.PullSparse(SparsePull("vocab", {0, 1, 2}), &pulled).ok());
  EXPECT_EQ(Rows(pulled), std::vector<float>(6, 1.0f));
  EXPECT_EQ(pulled.version(), 0);
}

// A sparse push from worker `worker` with request id `id`.
PushSparseRequest From(int worker, uint64_t id, PushSparseRequest push) {
  push.mutable_header()->mutable_sender()->set_job(JOB_WORKER);
  push.mutable_header()->mutable_sender()->set_index(worker);
  push.mutable_header()->set_request_id(id);
  return push;
}

TEST(ShardSparse, SyncCountsAWorkersRowsOncePerStep) {
  Shard shard{ShardOptions()};
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(CreateSparse(UpdateConfig::SYNC, 2), &created).ok());
  // Worker 0 pushes step 0 three times: a retry (same request id) and a
  // restarted worker redoing the step (a new one). The step still waits for
  // worker 1.
  const PushSparseRequest push = From(0, 1, SparsePush("vocab", {1}, {3, 1}, 0, 1));
  PushSparseResponse r;
  ASSERT_TRUE(shard.PushSparse(push, &r).ok());
  for (const PushSparseRequest& again : {push, From(0, 7, push)}) {
    absl::Status status = shard.PushSparse(again, &r);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(r.applied());
    EXPECT_EQ(r.version(), 1);
  }
  PullSparseResponse pulled;
  ASSERT_TRUE(shard.PullSparse(SparsePull("vocab", {1}), &pulled).ok());
  EXPECT_EQ(pulled.version(), 0);
  EXPECT_EQ(Rows(pulled), (std::vector<float>{1.0f, 1.0f}));
  ASSERT_TRUE(
      shard.PushSparse(From(1, 1, SparsePush("vocab", {1}, {1, 1}, 0, 3)), &r).ok());
  ASSERT_TRUE(shard.PullSparse(SparsePull("vocab", {1}, 1), &pulled).ok());
  EXPECT_EQ(pulled.version(), 1);
  // One gradient of each worker: sum (4, 2) over the global batch 4, lr 0.5
  // (worker 0 counted twice would be (7, 3) over 5).
  EXPECT_EQ(Rows(pulled), (std::vector<float>{0.5f, 0.75f}));
}

TEST(ShardSparse, AsyncAnswersARetryFromTheRecordThoughItIsNowStale) {
  Shard shard{ShardOptions()};
  CreateVariablesRequest create = CreateSparse(UpdateConfig::ASYNC, 2);
  create.mutable_update()->set_max_staleness(0);
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  const PushSparseRequest push = From(1, 42, SparsePush("emb", {4}, {1, 1}, 0, 2));
  PushSparseResponse first, r;
  ASSERT_TRUE(shard.PushSparse(push, &first).ok());
  ASSERT_TRUE(
      shard.PushSparse(From(0, 7, SparsePush("emb", {4}, {1, 1}, 1, 2)), &r).ok());
  EXPECT_EQ(shard.PushSparse(From(1, 43, push), &r).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status retried = shard.PushSparse(push, &r);
  ASSERT_TRUE(retried.ok()) << retried;
  EXPECT_EQ(r.version(), first.version());
  PullSparseResponse pulled;
  ASSERT_TRUE(shard.PullSparse(SparsePull("emb", {4}), &pulled).ok());
  EXPECT_EQ(Rows(pulled), std::vector<float>(2, 0.5f));
}

TEST(ShardSparse, AsyncAppliesARetriedPushOnce) {
  Shard shard{ShardOptions()};
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(CreateSparse(UpdateConfig::ASYNC, 2), &created).ok());
  const PushSparseRequest push = From(1, 42, SparsePush("emb", {4}, {1, 1}, 0, 2));
  PushSparseResponse first, retried;
  ASSERT_TRUE(shard.PushSparse(push, &first).ok());
  ASSERT_TRUE(shard.PushSparse(push, &retried).ok());
  EXPECT_TRUE(retried.applied());
  EXPECT_EQ(retried.version(), first.version());
  EXPECT_EQ(retried.version(), 1);
  PullSparseResponse pulled;
  ASSERT_TRUE(shard.PullSparse(SparsePull("emb", {4}), &pulled).ok());
  EXPECT_EQ(Rows(pulled), std::vector<float>(2, 0.75f));
  EXPECT_EQ(pulled.version(), 1);
  GetShardStatusRequest request;
  request.mutable_header()->set_run_id(kRun);
  ShardStatus status;
  ASSERT_TRUE(shard.GetShardStatus(request, &status).ok());
  EXPECT_EQ(status.pushes_applied(), 1);
  // Another request id is another gradient.
  PushSparseResponse next;
  ASSERT_TRUE(
      shard.PushSparse(From(1, 43, SparsePush("emb", {4}, {1, 1}, 1, 2)), &next).ok());
  EXPECT_EQ(next.version(), 2);
  ASSERT_TRUE(shard.PullSparse(SparsePull("emb", {4}), &pulled).ok());
  EXPECT_EQ(Rows(pulled), std::vector<float>(2, 0.5f));
}

TEST(ShardSparse, InterruptPullsWakesPullsWaitingForAStep) {
  Shard shard{ShardOptions()};
  CreateVariablesResponse created;
  // Steps time out after 5 s.
  ASSERT_TRUE(shard.CreateVariables(CreateSparse(UpdateConfig::SYNC, 2), &created).ok());
  absl::Status waited[2];
  const std::string names[2] = {"vocab", "emb"};
  const absl::Time start = absl::Now();
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      PullSparseResponse r;
      waited[i] = shard.PullSparse(SparsePull(names[i], {2}, 1), &r);
    });
  }
  absl::SleepFor(absl::Milliseconds(100));
  shard.InterruptPulls("the ps is shutting down");
  for (std::thread& t : waiters) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(waited[i].code(), absl::StatusCode::kAborted) << waited[i];
    EXPECT_EQ(waited[i].message(),
              "variable '" + names[i] + "': a pull waiting for version 1 gave "
              "up: the ps is shutting down");
  }
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
