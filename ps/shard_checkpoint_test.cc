#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "gtest/gtest.h"
#include "ps/shard.h"

namespace pstrain {
namespace ps {
namespace {

constexpr char kRun[] = "run-1";

// The shards' checkpoint root (their --model_dir).
std::string Root() { return std::getenv("TEST_TMPDIR"); }

// The path of checkpoint directory `name`; requests name it by `name`.
std::string Dir(const std::string& name) { return Root() + "/" + name; }

// The name a request gives for checkpoint directory `dir`.
std::string Name(const std::string& dir) {
  return dir.substr(Root().size() + 1);
}

void AddVariable(CreateVariablesRequest* r, const std::string& name,
                 std::vector<int64_t> dims, bool sparse,
                 VariablePlacement::Partitioning partitioning,
                 std::vector<std::pair<int64_t, int64_t>> rows) {
  ShardVariable* v = r->add_variables();
  v->mutable_def()->set_name(name);
  v->mutable_def()->set_dtype(DT_FLOAT);
  v->mutable_def()->set_sparse(sparse);
  for (int64_t d : dims) v->mutable_def()->mutable_shape()->add_dims(d);
  v->mutable_def()->mutable_initializer()->mutable_constant()->set_value(1);
  v->mutable_placement()->set_name(name);
  v->mutable_placement()->set_partitioning(partitioning);
  for (size_t i = 0; i < rows.size(); ++i) {
    auto* s = v->mutable_placement()->add_slices();
    s->set_ps_task(i);
    s->set_row_begin(rows[i].first);
    s->set_row_end(rows[i].second);
  }
}

// "w" [4, 2] dense and "emb" a growing table [0, 2], over `num_ps` tasks,
// momentum SGD (one slot per variable), async.
CreateVariablesRequest Create(int num_ps, int task) {
  CreateVariablesRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_ps_task(task);
  r.mutable_optimizer()->mutable_momentum()->set_momentum(0.5f);
  r.mutable_optimizer()->set_learning_rate(1.0);
  r.mutable_update()->set_mode(UpdateConfig::ASYNC);
  r.mutable_update()->set_num_workers(1);
  r.mutable_update()->set_max_staleness(-1);
  if (num_ps == 1) {
    AddVariable(&r, "w", {4, 2}, false, VariablePlacement::WHOLE, {{0, 4}});
    AddVariable(&r, "emb", {0, 2}, true, VariablePlacement::ROW_HASH, {{0, 0}});
  } else {
    AddVariable(&r, "w", {4, 2}, false, VariablePlacement::ROW_RANGES,
                {{0, 1}, {1, 4}});
    AddVariable(&r, "emb", {0, 2}, true, VariablePlacement::ROW_HASH,
                {{0, 0}, {0, 0}});
  }
  return r;
}

std::unique_ptr<Shard> MakeShard(int num_ps, int task) {
  ShardOptions options;
  options.ps_task = task;
  options.checkpoint_root = Root();
  auto shard = std::make_unique<Shard>(options);
  CreateVariablesResponse created;
  EXPECT_TRUE(shard->CreateVariables(Create(num_ps, task), &created).ok());
  return shard;
}

// Pushes gradient `g` (all elements) to this shard's piece of "w" (rows
// given) and to `ids` of "emb"; from worker 0's step `step` if >= 0.
void Push(Shard* shard, int64_t rows_begin, int64_t rows_end, float g,
          std::vector<int64_t> ids, int64_t step = -1) {
  RequestHeader header;
  header.set_run_id(kRun);
  if (step >= 0) {
    header.mutable_sender()->set_job(JOB_WORKER);
    header.set_step(step);
  }
  PushDenseRequest p;
  *p.mutable_header() = header;
  p.set_batch_size(1);
  p.set_version(0);
  NamedTensor* t = p.add_gradients();
  t->set_name("w");
  t->mutable_tensor()->set_dtype(DT_FLOAT);
  t->mutable_tensor()->mutable_shape()->add_dims(4);
  t->mutable_tensor()->mutable_shape()->add_dims(2);
  t->mutable_tensor()->mutable_slice()->set_begin(rows_begin);
  t->mutable_tensor()->mutable_slice()->set_end(rows_end);
  std::vector<float> values((rows_end - rows_begin) * 2, g);
  t->mutable_tensor()->set_content(values.data(), values.size() * 4);
  const PushDenseRequest* messages[] = {&p};
  ASSERT_TRUE(shard->PushDense(messages).ok());
  if (ids.empty()) return;
  PushSparseRequest s;
  *s.mutable_header() = header;
  s.set_name("emb");
  s.set_batch_size(1);
  for (int64_t id : ids) s.add_ids(id);
  s.mutable_gradients()->set_dtype(DT_FLOAT);
  s.mutable_gradients()->mutable_shape()->add_dims(ids.size());
  s.mutable_gradients()->mutable_shape()->add_dims(2);
  std::vector<float> rows(ids.size() * 2, g);
  s.mutable_gradients()->set_content(rows.data(), rows.size() * 4);
  PushSparseResponse response;
  ASSERT_TRUE(shard->PushSparse(s, &response).ok());
}

std::vector<float> PullW(Shard* shard) {
  PullDenseRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.add_names("w");
  std::vector<float> out;
  EXPECT_TRUE(shard->PullDense(r, [&](const DenseVariable&,
                                      const ValueView& value) {
    out.resize(value.size / 4);
    std::memcpy(out.data(), value.data, value.size);
  }).ok());
  return out;
}

std::vector<float> PullEmb(Shard* shard, std::vector<int64_t> ids) {
  PullSparseRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_name("emb");
  for (int64_t id : ids) r.add_ids(id);
  PullSparseResponse response;
  EXPECT_TRUE(shard->PullSparse(r, &response).ok());
  std::vector<float> out(response.values().content().size() / 4);
  std::memcpy(out.data(), response.values().content().data(), out.size() * 4);
  return out;
}

SaveResponse Save(Shard* shard, const std::string& dir) {
  SaveRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_directory(Name(dir));
  SaveResponse response;
  absl::Status status = shard->Save(r, &response);
  EXPECT_TRUE(status.ok()) << status;
  return response;
}

absl::Status Restore(Shard* shard, const std::string& dir,
                     const std::vector<SavedSlice>& slices,
                     int64_t generation = 0) {
  RestoreRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_directory(Name(dir));
  r.set_generation(generation);
  for (const SavedSlice& s : slices) *r.add_slices() = s;
  RestoreResponse response;
  return shard->Restore(r, &response);
}

std::vector<SavedSlice> Slices(const SaveResponse& r) {
  return std::vector<SavedSlice>(r.slices().begin(), r.slices().end());
}

TEST(ShardCheckpoint, RestoreBringsBackValuesSlotsAndVersions) {
  auto shard = MakeShard(1, 0);
  Push(shard.get(), 0, 4, 1.0f, {2, 5});
  const std::vector<float> w = PullW(shard.get());
  const std::vector<float> emb = PullEmb(shard.get(), {2, 5, 9});
  const std::string dir = Dir("ckpt-1");
  const SaveResponse saved = Save(shard.get(), dir);
  // w, w/momentum, emb, emb/momentum.
  ASSERT_EQ(saved.slices_size(), 4);
  EXPECT_EQ(saved.slices(0).file(), "ps-0.data");

  Push(shard.get(), 0, 4, 3.0f, {2, 7});
  ASSERT_NE(PullW(shard.get()), w);
  ASSERT_TRUE(Restore(shard.get(), dir, Slices(saved)).ok());
  EXPECT_EQ(PullW(shard.get()), w);
  EXPECT_EQ(PullEmb(shard.get(), {2, 5, 9}), emb);
  // The momentum came back too: the same push again gives the same result
  // as on a shard that never saw the extra push.
  auto fresh = MakeShard(1, 0);
  Push(fresh.get(), 0, 4, 1.0f, {2, 5});
  Push(fresh.get(), 0, 4, 2.0f, {2});
  Push(shard.get(), 0, 4, 2.0f, {2});
  EXPECT_EQ(PullW(shard.get()), PullW(fresh.get()));
  EXPECT_EQ(PullEmb(shard.get(), {2, 5}), PullEmb(fresh.get(), {2, 5}));
}

TEST(ShardCheckpoint, RestoreStartsANewGenerationAndWakesWaitingPulls) {
  auto shard = MakeShard(1, 0);
  const std::string dir = Dir("ckpt-gen");
  const std::vector<SavedSlice> slices = Slices(Save(shard.get(), dir));
  // A pull waiting for a step that will never come in this generation.
  absl::Status waited;
  std::thread waiter([&] {
    PullDenseRequest r;
    r.mutable_header()->set_run_id(kRun);
    r.add_names("w");
    r.set_min_version(5);
    waited = shard->PullDense(
        r, [](const DenseVariable&, const ValueView&) {});
  });
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(Restore(shard.get(), dir, slices, /*generation=*/2).ok());
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  GetShardStatusRequest status_request;
  status_request.mutable_header()->set_run_id(kRun);
  ShardStatus status;
  ASSERT_TRUE(shard->GetShardStatus(status_request, &status).ok());
  EXPECT_EQ(status.generation(), 2);
}

TEST(ShardCheckpoint, RestoreWakesWaitingSparsePulls) {
  // Steps time out after 10 s.
  ShardOptions options;
  options.checkpoint_root = Root();
  options.default_step_timeout = absl::Seconds(10);
  auto shard = std::make_unique<Shard>(options);
  CreateVariablesResponse created;
  ASSERT_TRUE(shard->CreateVariables(Create(1, 0), &created).ok());
  const std::string dir = Dir("ckpt-sparse-gen");
  const std::vector<SavedSlice> slices = Slices(Save(shard.get(), dir));
  // A pull of table rows waiting for a step that will never come in this
  // generation.
  absl::Status waited;
  const absl::Time start = absl::Now();
  std::thread waiter([&] {
    PullSparseRequest r;
    r.mutable_header()->set_run_id(kRun);
    r.set_name("emb");
    r.add_ids(2);
    r.set_min_version(5);
    PullSparseResponse response;
    waited = shard->PullSparse(r, &response);
  });
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(Restore(shard.get(), dir, slices, /*generation=*/2).ok());
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_EQ(waited.message(),
            "variable 'emb': a pull waiting for version 5 gave up: it was "
            "restored from a checkpoint");
}

TEST(ShardCheckpoint, RestoresIntoAnotherNumberOfPsTasks) {
  // Written by two ps tasks: w rows [0, 1) and [1, 4), emb even and odd ids.
  auto ps0 = MakeShard(2, 0), ps1 = MakeShard(2, 1);
  Push(ps0.get(), 0, 1, 1.0f, {2, 4});
  Push(ps1.get(), 1, 4, 2.0f, {3});
  const std::string dir = Dir("ckpt-2");
  std::vector<SavedSlice> slices = Slices(Save(ps0.get(), dir));
  for (const SavedSlice& s : Slices(Save(ps1.get(), dir))) slices.push_back(s);

  auto one = MakeShard(1, 0);
  ASSERT_TRUE(Restore(one.get(), dir, slices).ok());
  std::vector<float> w = PullW(ps0.get());
  for (float v : PullW(ps1.get())) w.push_back(v);
  EXPECT_EQ(PullW(one.get()), w);
  std::vector<float> emb = PullEmb(ps0.get(), {2, 4});
  for (float v : PullEmb(ps1.get(), {3})) emb.push_back(v);
  EXPECT_EQ(PullEmb(one.get(), {2, 4, 3}), emb);
}

TEST(ShardCheckpoint, DamagedCheckpointIsRefusedAndChangesNothing) {
  auto shard = MakeShard(1, 0);
  Push(shard.get(), 0, 4, 1.0f, {2});
  const std::string dir = Dir("ckpt-3");
  const std::vector<SavedSlice> slices = Slices(Save(shard.get(), dir));
  Push(shard.get(), 0, 4, 5.0f, {});
  const std::vector<float> current = PullW(shard.get());

  // A flipped byte.
  {
    std::fstream f(dir + "/ps-0.data", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('\x7f');
  }
  absl::Status status = Restore(shard.get(), dir, slices);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("ps-0.data: bytes [0, 32) fail their CRC32C check"),
            std::string::npos)
      << status;
  EXPECT_EQ(PullW(shard.get()), current);

  // An intact checkpoint for the cases below.
  const std::string good_dir = Dir("ckpt-3-good");
  const std::vector<SavedSlice> good = Slices(Save(shard.get(), good_dir));

  // A missing slice (the momentum of w).
  std::vector<SavedSlice> missing = good;
  missing.erase(missing.begin() + 1);
  status = Restore(shard.get(), good_dir, missing);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "checkpoint has no 'w/momentum' (was it written for another model "
            "or optimizer?)");

  // A consistent slice holding only rows [0, 2) of w's four.
  std::vector<SavedSlice> partial = good;
  partial[0].mutable_rows()->set_end(2);
  partial[0].set_length(16);
  {
    std::ifstream f(good_dir + "/ps-0.data", std::ios::binary);
    std::string head(16, '\0');
    f.read(head.data(), 16);
    partial[0].set_crc32c(Crc32c(head.data(), head.size()));
  }
  status = Restore(shard.get(), good_dir, partial);
  EXPECT_EQ(status.message(),
            "checkpoint lacks rows [2, 4) of 'w' (rows [0, 4) wanted)");

  // The same rows twice add up to four, but rows [2, 4) are in neither.
  std::vector<SavedSlice> twice = partial;
  twice.push_back(partial[0]);
  status = Restore(shard.get(), good_dir, twice);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), "checkpoint slices of 'w' overlap at row 0");

  // A truncated file.
  const SaveResponse fresh = Save(shard.get(), Dir("ckpt-4"));
  ASSERT_EQ(truncate((Dir("ckpt-4") + "/ps-0.data").c_str(), 40), 0);
  status = Restore(shard.get(), Dir("ckpt-4"), Slices(fresh));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("truncated"), std::string::npos) << status;

  // A file name reaching outside the checkpoint directory.
  std::vector<SavedSlice> escaping = slices;
  escaping[0].set_file("../ps-0.data");
  EXPECT_EQ(Restore(shard.get(), dir, escaping).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PullW(shard.get()), current);
}

// An async ps applies a worker's push of a step once (a restarted worker
// redoing it is answered from the record); once restored, the steps after
// the checkpoint are trained again, and their pushes count again.
TEST(ShardCheckpoint, RestoredStepsArePushedAndAppliedAgain) {
  auto shard = MakeShard(1, 0);
  const std::string dir = Dir("ckpt-redo");
  const std::vector<SavedSlice> slices = Slices(Save(shard.get(), dir));
  const std::vector<float> saved = PullW(shard.get());
  Push(shard.get(), 0, 4, 1.0f, {3}, /*step=*/0);
  const std::vector<float> after_step_0 = PullW(shard.get());
  ASSERT_NE(after_step_0, saved);
  Push(shard.get(), 0, 4, 1.0f, {3}, /*step=*/0);  // redone: not applied
  EXPECT_EQ(PullW(shard.get()), after_step_0);
  ASSERT_TRUE(Restore(shard.get(), dir, slices).ok());
  EXPECT_EQ(PullW(shard.get()), saved);
  Push(shard.get(), 0, 4, 1.0f, {3}, /*step=*/0);  // trained again: applied
  EXPECT_EQ(PullW(shard.get()), after_step_0);
}

TEST(ShardCheckpoint, SyncSaveOnlyAtAStepBoundary) {
  CreateVariablesRequest create = Create(1, 0);
  create.mutable_update()->set_mode(UpdateConfig::SYNC);
  ShardOptions options;
  options.checkpoint_root = Root();
  Shard shard{options};
  CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  SaveRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_directory("ckpt-5");
  r.set_step(3);
  SaveResponse response;
  const absl::Status status = shard.Save(r, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "variable 'w' is at version 0, not at step 3: save at a step "
            "boundary");
}

// Only "emb", a growing table hashed over `num_ps` tasks with a lifecycle
// (admission at 2 updates, at most `max_rows` rows per piece) and lazy Adam
// of its own (3 slots), the run's optimizer momentum.
CreateVariablesRequest CreateWithLifecycle(int num_ps, int task,
                                           int64_t max_rows) {
  CreateVariablesRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_ps_task(task);
  r.mutable_optimizer()->mutable_momentum()->set_momentum(0.5f);
  r.mutable_optimizer()->set_learning_rate(1.0);
  r.mutable_update()->set_mode(UpdateConfig::ASYNC);
  r.mutable_update()->set_num_workers(1);
  r.mutable_update()->set_max_staleness(-1);
  AddVariable(&r, "emb", {0, 2}, true, VariablePlacement::ROW_HASH,
              std::vector<std::pair<int64_t, int64_t>>(num_ps, {0, 0}));
  VariableDef* def = r.mutable_variables(0)->mutable_def();
  def->mutable_lifecycle()->set_min_count(2);
  def->mutable_lifecycle()->set_max_rows(max_rows);
  OptimizerConfig* own = def->mutable_optimizer();
  own->set_learning_rate(0.1);
  own->mutable_lazy_adam()->set_beta_1(0.9f);
  own->mutable_lazy_adam()->set_beta_2(0.999f);
  own->mutable_lazy_adam()->set_epsilon(1e-7f);
  return r;
}

// Shards 0..num_ps-1 of CreateWithLifecycle.
std::vector<std::unique_ptr<Shard>> LifecycleShards(int num_ps,
                                                    int64_t max_rows) {
  std::vector<std::unique_ptr<Shard>> shards;
  for (int task = 0; task < num_ps; ++task) {
    ShardOptions options;
    options.ps_task = task;
    options.checkpoint_root = Root();
    shards.push_back(std::make_unique<Shard>(options));
    CreateVariablesResponse created;
    absl::Status status = shards.back()->CreateVariables(
        CreateWithLifecycle(num_ps, task, max_rows), &created);
    EXPECT_TRUE(status.ok()) << status;
  }
  return shards;
}

// Pushes gradient `g` for `id` to the shard owning it.
void PushId(std::vector<std::unique_ptr<Shard>>& shards, int64_t id, float g) {
  Shard* shard = shards[id % shards.size()].get();
  PushSparseRequest s;
  s.mutable_header()->set_run_id(kRun);
  s.set_name("emb");
  s.set_batch_size(1);
  s.add_ids(id);
  s.mutable_gradients()->set_dtype(DT_FLOAT);
  s.mutable_gradients()->mutable_shape()->add_dims(1);
  s.mutable_gradients()->mutable_shape()->add_dims(2);
  const float rows[2] = {g, -g};
  s.mutable_gradients()->set_content(rows, sizeof(rows));
  PushSparseResponse response;
  absl::Status status = shard->PushSparse(s, &response);
  EXPECT_TRUE(status.ok()) << status;
}

// Each id's row, pulled from the shard owning it.
std::vector<float> PullIds(std::vector<std::unique_ptr<Shard>>& shards,
                           const std::vector<int64_t>& ids) {
  std::vector<float> out;
  for (int64_t id : ids) {
    for (float v : PullEmb(shards[id % shards.size()].get(), {id})) {
      out.push_back(v);
    }
  }
  return out;
}

int64_t TotalRows(std::vector<std::unique_ptr<Shard>>& shards) {
  int64_t rows = 0;
  for (auto& shard : shards) rows += shard->EmbeddingRows()["emb"];
  return rows;
}

ShardStatus::EmbeddingTableStatus TableStatus(Shard* shard) {
  GetShardStatusRequest request;
  request.mutable_header()->set_run_id(kRun);
  ShardStatus status;
  EXPECT_TRUE(shard->GetShardStatus(request, &status).ok());
  return status.embedding_tables().at("emb");
}

std::vector<SavedSlice> SaveAll(std::vector<std::unique_ptr<Shard>>& shards,
                                const std::string& dir) {
  std::vector<SavedSlice> slices;
  for (auto& shard : shards) {
    for (const SavedSlice& s : Slices(Save(shard.get(), dir))) {
      slices.push_back(s);
    }
  }
  return slices;
}

// 1 -> 3 -> 2 ps tasks: rows, lazy Adam's slots (m, v and the per-row t),
// update counts and pending admission counts follow their ids.
TEST(ShardCheckpoint, LifecycleTablesRestoreOntoOtherNumbersOfPsTasks) {
  auto one = LifecycleShards(1, 100);
  std::vector<int64_t> rows;
  for (int64_t id = 0; id < 12; ++id) {
    rows.push_back(id);
    PushId(one, id, 0.5f);
    PushId(one, id, 0.25f);  // admitted: count 2
  }
  for (int64_t id = 0; id < 6; ++id) PushId(one, id, 1.0f);    // count 3
  for (int64_t id = 20; id < 26; ++id) PushId(one, id, 1.0f);  // pending, 1
  EXPECT_EQ(TotalRows(one), 12);
  EXPECT_EQ(TableStatus(one[0].get()).pending_ids(), 6);
  // Lazy Adam's three slots beside the value; id, counts, hash entry too.
  EXPECT_EQ(TableStatus(one[0].get()).bytes_per_row(), 2 * 4 * 4 + 16 + 8 + 17);
  const std::vector<float> values = PullIds(one, rows);

  const std::string dir1 = Dir("ckpt-lifecycle-1");
  const std::vector<SavedSlice> slices1 = SaveAll(one, dir1);
  auto three = LifecycleShards(3, 100);
  for (auto& shard : three) {
    ASSERT_TRUE(Restore(shard.get(), dir1, slices1).ok());
  }
  EXPECT_EQ(TotalRows(three), 12);
  int64_t pending = 0;
  for (auto& shard : three) {
    EXPECT_EQ(shard->EmbeddingRows()["emb"], 4);  // ids 0..11 by id % 3
    pending += TableStatus(shard.get()).pending_ids();
  }
  EXPECT_EQ(pending, 6);
  EXPECT_EQ(PullIds(three, rows), values);
  // The same update on both: equal results need m, v and t restored.
  PushId(one, 4, -0.5f);
  PushId(three, 4, -0.5f);
  EXPECT_EQ(PullIds(three, {4}), PullIds(one, {4}));
  // Id 21 was counted once before the save: one more update admits it.
  PushId(three, 21, 1.0f);
  EXPECT_EQ(TotalRows(three), 13);

  // 3 -> 2 tasks capped at 3 rows each: the counts came along, so each
  // keeps its three ids counted 3 times (0, 2, 4 and 1, 3, 5; id 4 got a
  // fourth update, id 21 has 1) and evicts the rest.
  const std::string dir3 = Dir("ckpt-lifecycle-3");
  const std::vector<SavedSlice> slices3 = SaveAll(three, dir3);
  auto two = LifecycleShards(2, 3);
  for (auto& shard : two) {
    ASSERT_TRUE(Restore(shard.get(), dir3, slices3).ok());
  }
  EXPECT_EQ(TotalRows(two), 6);
  EXPECT_EQ(PullIds(two, {0, 1, 2, 3, 5}), PullIds(three, {0, 1, 2, 3, 5}));
  EXPECT_EQ(PullIds(two, {4}), PullIds(three, {4}));
  // Evicted rows read as zeros (admission: a pull does not create them).
  EXPECT_EQ(PullIds(two, {6, 7}), std::vector<float>(4, 0.0f));
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
