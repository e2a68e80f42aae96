#include "worker/sparse_tables.h"

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
#include "common/placement.h"
#include "compute/id_remap.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "ps/ps_service.h"
#include "ps/shard.h"
#include "ps/staleness.h"

namespace pstrain {
namespace worker {
namespace {

using ::testing::HasSubstr;

constexpr int kRows = 10;
constexpr int kWidth = 3;
constexpr double kLearningRate = 0.5;

// Embedding(10, 3) on 2 ids per example, then a Dense; with `growing`,
// Embedding(0, 3): a table that grows on first touch.
ModelSpec EmbeddingModel(bool growing = false) {
  const std::string json =
      absl::StrCat(R"({"class_name": "Sequential", "config": {
    "name": "sequential", "layers": [
      {"class_name": "Embedding", "config": {"name": "embedding",
        "batch_input_shape": [null, 2], "input_dim": )",
                   growing ? 0 : 10, R"(, "output_dim": 3}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})");
  return ParseKerasModel(json, /*seed=*/7).value();
}

// Two in-process ps tasks holding the model, the embedding table split in
// two row ranges ([0, 5) on one, [5, 10) on the other), and one worker's
// clients of them.
class TwoPs {
 public:
  explicit TwoPs(UpdateConfig::Mode mode, int num_workers = 1,
                 bool growing = false) {
    spec_ = EmbeddingModel(growing);
    PlacementOptions options;
    options.num_ps = 2;
    options.rules = {{"embedding/embeddings", 2}};
    placement_ = ComputePlacement(spec_.variables, options).value();
    std::vector<std::string> addresses;
    for (int task = 0; task < 2; ++task) {
      ps::ShardOptions shard_options;
      shard_options.ps_task = task;
      shard_options.default_step_timeout = absl::Seconds(5);
      shards_.push_back(std::make_unique<ps::Shard>(shard_options));
      services_.push_back(std::make_unique<ps::PsService>(
          shards_.back().get(), ps::PsServiceOptions()));
      int port = 0;
      EXPECT_TRUE(services_.back()->Start("127.0.0.1:0", &port).ok());
      addresses.push_back(absl::StrCat("127.0.0.1:", port));
    }
    ps_ = Connect(addresses, 0);
    OptimizerConfig optimizer;
    optimizer.mutable_sgd();
    optimizer.set_learning_rate(kLearningRate);
    update_.set_mode(mode);
    update_.set_num_workers(num_workers);
    update_.set_replicas_to_aggregate(num_workers);
    update_.set_max_staleness(mode == UpdateConfig::ASYNC ? 0 : -1);
    EXPECT_TRUE(ps_->CreateVariables(optimizer, update_).ok());
    addresses_ = addresses;
  }
  std::unique_ptr<ps::PsClusterClient> Connect(
      const std::vector<std::string>& addresses, int worker) {
    std::vector<std::unique_ptr<ps::PsClient>> clients;
    for (const std::string& address : addresses) {
      ps::PsClientOptions options;
      options.run_id = "run";
      options.sender.set_job(JOB_WORKER);
      options.sender.set_index(worker);
      options.timeout = absl::Seconds(10);
      clients.push_back(std::make_unique<ps::PsClient>(
          CreatePstrainChannel(address), options));
    }
    return ps::PsClusterClient::Create(std::move(clients), placement_,
                                       spec_.variables)
        .value();
  }

  std::unique_ptr<SparseTables> Tables(ps::PsClusterClient* ps,
                                       int64_t batch_rows = 0) {
    return SparseTables::Create(spec_, placement_, ps,
                                update_.mode() == UpdateConfig::SYNC,
                                batch_rows)
        .value();
  }

  // Every row of the table, as the ps holds it now.
  std::vector<float> AllRows() {
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < kRows; ++id) ids.push_back(id);
    std::vector<float> rows(kRows * kWidth);
    EXPECT_TRUE(
        ps_->PullSparse("embedding/embeddings", ids, 0, rows.data()).ok());
    return rows;
  }

  int64_t Version(int task) {
    return ps_->client(task)
        ->GetShardStatus()
        .value()
        .variable_versions()
        .at("embedding/embeddings");
  }

  ModelSpec spec_;
  Placement placement_;
  UpdateConfig update_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<ps::Shard>> shards_;
  std::vector<std::unique_ptr<ps::PsService>> services_;
  std::unique_ptr<ps::PsClusterClient> ps_;
};

struct Mirror {
  Mirror()
      : weights(Tensor::Create(DT_FLOAT, {kRows, kWidth}).value()),
        gradient(Tensor::Create(DT_FLOAT, {kRows, kWidth}).value()) {
    std::fill_n(weights.flat<float>().data(), kRows * kWidth, -99.0f);
    std::fill_n(gradient.flat<float>().data(), kRows * kWidth, 0.0f);
  }
  std::map<std::string, Tensor*> weights_map() {
    return {{"embedding/embeddings", &weights}};
  }
  std::map<std::string, Tensor*> gradient_map() {
    return {{"embedding/embeddings", &gradient}};
  }
  float* w(int64_t id) { return weights.flat<float>().data() + id * kWidth; }
  float* g(int64_t id) { return gradient.flat<float>().data() + id * kWidth; }
  Tensor weights;
  Tensor gradient;
};

// `ids` as a batch of `batch` examples' rows.
Tensor Rows(const std::vector<int32_t>& ids, int64_t batch) {
  Tensor rows = Tensor::Create(
                    DT_INT32, {batch, static_cast<int64_t>(ids.size()) / batch})
                    .value();
  std::copy(ids.begin(), ids.end(), rows.data<int32_t>());
  return rows;
}

TEST(SparseTables, PullsOnlyTouchedRowsAndPushesTheirGradients) {
  TwoPs cluster(UpdateConfig::SYNC);
  const std::vector<float> before = cluster.AllRows();
  std::unique_ptr<SparseTables> tables = cluster.Tables(cluster.ps_.get());
  ASSERT_FALSE(tables->empty());
  EXPECT_TRUE(tables->Holds("embedding/embeddings"));
  EXPECT_FALSE(tables->Holds("dense/kernel"));

  // Two examples, ids {1, 3} and {3, 1}: only ps 0's rows.
  const std::vector<int32_t> ids = {1, 3, 3, 1};
  tables->Clear();
  ASSERT_TRUE(tables->Touch(Rows(ids, 2), {40, 41}).ok());
  EXPECT_EQ(tables->num_touched(), 2);
  Mirror mirror;
  ASSERT_TRUE(tables->Pull(0, mirror.weights_map()).ok());
  for (int64_t id = 0; id < kRows; ++id) {
    for (int j = 0; j < kWidth; ++j) {
      const float expected =
          id == 1 || id == 3 ? before[id * kWidth + j] : -99.0f;
      EXPECT_EQ(mirror.w(id)[j], expected) << id << "," << j;
    }
  }

  // The gradient of every row (untouched ones too, which must not be sent).
  for (int64_t id = 0; id < kRows; ++id) {
    for (int j = 0; j < kWidth; ++j) mirror.g(id)[j] = 1.0f + id + j;
  }
  ASSERT_TRUE(tables->Push(0, /*batch_size=*/2, mirror.gradient_map()).ok());

  // Both pieces completed step 0: ps 1 got an empty push.
  EXPECT_EQ(cluster.Version(0), 1);
  EXPECT_EQ(cluster.Version(1), 1);
  const std::vector<float> after = cluster.AllRows();
  for (int64_t id = 0; id < kRows; ++id) {
    for (int j = 0; j < kWidth; ++j) {
      const float g = id == 1 || id == 3 ? (1.0f + id + j) / 2 : 0.0f;
      EXPECT_FLOAT_EQ(after[id * kWidth + j],
                      before[id * kWidth + j] - kLearningRate * g)
          << id << "," << j;
    }
  }

  // The next step waits for version 1 on both pieces, which it has.
  tables->Clear();
  const std::vector<int32_t> other = {7, 7};
  ASSERT_TRUE(tables->Touch(Rows(other, 1), {5}).ok());
  ASSERT_TRUE(tables->Pull(1, mirror.weights_map()).ok());
  EXPECT_EQ(mirror.w(7)[0], after[7 * kWidth]);
}

TEST(SparseTables, SyncStepWaitsForEveryWorker) {
  TwoPs cluster(UpdateConfig::SYNC, /*num_workers=*/2);
  std::unique_ptr<ps::PsClusterClient> other =
      cluster.Connect(cluster.addresses_, 1);
  std::unique_ptr<SparseTables> w0 = cluster.Tables(cluster.ps_.get());
  std::unique_ptr<SparseTables> w1 = cluster.Tables(other.get());
  Mirror m0, m1;
  const std::vector<int32_t> ids0 = {0, 2};  // ps 0 only
  const std::vector<int32_t> ids1 = {8, 2};  // both
  for (int i = 0; i < kRows * kWidth; ++i) {
    m0.gradient.flat<float>()[i] = 1;
    m1.gradient.flat<float>()[i] = 3;
  }
  w0->Clear();
  w1->Clear();
  ASSERT_TRUE(w0->Touch(Rows(ids0, 1), {0}).ok());
  ASSERT_TRUE(w1->Touch(Rows(ids1, 1), {1}).ok());
  ASSERT_TRUE(w0->Pull(0, m0.weights_map()).ok());
  ASSERT_TRUE(w1->Pull(0, m1.weights_map()).ok());
  const std::vector<float> before = cluster.AllRows();
  ASSERT_TRUE(w0->Push(0, 1, m0.gradient_map()).ok());
  EXPECT_EQ(cluster.Version(1), 0);  // Waiting for worker 1.
  ASSERT_TRUE(w1->Push(0, 1, m1.gradient_map()).ok());
  EXPECT_EQ(cluster.Version(0), 1);
  EXPECT_EQ(cluster.Version(1), 1);
  const std::vector<float> after = cluster.AllRows();
  // Row 2: (1 + 3) / 2 examples; row 0: 1 / 2; row 8: 3 / 2; others as were.
  const std::map<int, float> mean = {{0, 0.5f}, {2, 2.0f}, {8, 1.5f}};
  for (int64_t id = 0; id < kRows; ++id) {
    const float g = mean.count(id) ? mean.at(id) : 0.0f;
    EXPECT_FLOAT_EQ(after[id * kWidth], before[id * kWidth] - kLearningRate * g)
        << id;
  }
}

// Every call of a step is in flight at once, from the caller's thread; one
// to a ps that is gone for a moment (its service stopped, a new one over
// the same shard at the same address 300 ms later) is tried again until it
// is back, and a push is applied once.
TEST(SparseTables, PullAndPushWaitForAPsThatComesBack) {
  TwoPs cluster(UpdateConfig::SYNC);
  int retries = 0;
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  for (const std::string& address : cluster.addresses_) {
    ps::PsClientOptions options;
    options.run_id = "run";
    options.sender.set_job(JOB_WORKER);
    options.timeout = absl::Seconds(10);
    options.retry.on_retry = [&retries] { ++retries; };
    clients.push_back(
        std::make_unique<ps::PsClient>(CreatePstrainChannel(address), options));
  }
  std::unique_ptr<ps::PsClusterClient> ps =
      ps::PsClusterClient::Create(std::move(clients), cluster.placement_,
                                  cluster.spec_.variables)
          .value();
  const std::vector<float> before = cluster.AllRows();
  std::unique_ptr<SparseTables> tables = cluster.Tables(ps.get());
  const std::vector<int32_t> ids = {1, 8};  // one row on each ps
  Mirror mirror;
  for (int64_t id = 0; id < kRows; ++id) {
    for (int j = 0; j < kWidth; ++j) mirror.g(id)[j] = 2.0f;
  }
  // Restarts ps 1's service: gone now, back 300 ms later.
  auto restart = [&cluster](absl::Status* restarted) {
    cluster.services_[1]->Stop();
    cluster.services_[1] = std::make_unique<ps::PsService>(
        cluster.shards_[1].get(), ps::PsServiceOptions());
    return std::thread([&cluster, restarted] {
      absl::SleepFor(absl::Milliseconds(300));
      int port = 0;
      *restarted = cluster.services_[1]->Start(cluster.addresses_[1], &port);
    });
  };
  tables->Clear();
  ASSERT_TRUE(tables->Touch(Rows(ids, 1), {0}).ok());
  absl::Status restarted;
  std::thread back = restart(&restarted);
  const absl::Status pulled = tables->Pull(0, mirror.weights_map());
  back.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  ASSERT_TRUE(pulled.ok()) << pulled;
  EXPECT_GE(retries, 1);
  EXPECT_EQ(mirror.w(1)[0], before[1 * kWidth]);
  EXPECT_EQ(mirror.w(8)[0], before[8 * kWidth]);

  retries = 0;
  back = restart(&restarted);
  const absl::Status pushed = tables->Push(0, 1, mirror.gradient_map());
  back.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  ASSERT_TRUE(pushed.ok()) << pushed;
  EXPECT_GE(retries, 1);
  EXPECT_EQ(cluster.Version(0), 1);
  EXPECT_EQ(cluster.Version(1), 1);
  const std::vector<float> after = cluster.AllRows();
  for (int64_t id : {1, 8}) {
    EXPECT_FLOAT_EQ(after[id * kWidth], before[id * kWidth] - kLearningRate * 2)
        << id;
  }
}

TEST(SparseTables, AsyncPushesCarryThePulledVersion) {
  TwoPs cluster(UpdateConfig::ASYNC);  // max_staleness 0
  std::unique_ptr<SparseTables> tables = cluster.Tables(cluster.ps_.get());
  Mirror mirror;
  const std::vector<int32_t> ids = {6, 6};
  for (int round = 0; round < 2; ++round) {
    tables->Clear();
    ASSERT_TRUE(tables->Touch(Rows(ids, 1), {0}).ok());
    ASSERT_TRUE(tables->Pull(0, mirror.weights_map()).ok());
    ASSERT_TRUE(tables->Push(123, 1, mirror.gradient_map()).ok()) << round;
  }
  EXPECT_EQ(cluster.Version(0), 0);  // Untouched: neither pulled nor pushed.
  EXPECT_EQ(cluster.Version(1), 2);

  // A second worker moves the piece on; this one's push is then too stale.
  std::unique_ptr<ps::PsClusterClient> other =
      cluster.Connect(cluster.addresses_, 0);
  std::unique_ptr<SparseTables> fast = cluster.Tables(other.get());
  tables->Clear();
  fast->Clear();
  ASSERT_TRUE(tables->Touch(Rows(ids, 1), {0}).ok());
  ASSERT_TRUE(fast->Touch(Rows(ids, 1), {0}).ok());
  ASSERT_TRUE(tables->Pull(0, mirror.weights_map()).ok());
  ASSERT_TRUE(fast->Pull(0, mirror.weights_map()).ok());
  ASSERT_TRUE(fast->Push(0, 1, mirror.gradient_map()).ok());
  EXPECT_TRUE(ps::IsStaleGradient(tables->Push(0, 1, mirror.gradient_map())));
}

TEST(SparseTables, IdOutsideTheVocabularyNamesTheExample) {
  TwoPs cluster(UpdateConfig::SYNC);
  std::unique_ptr<SparseTables> tables = cluster.Tables(cluster.ps_.get());
  const std::vector<int32_t> ids = {1, 2, 4, 10};
  tables->Clear();
  const absl::Status status = tables->Touch(Rows(ids, 2), {17, 1234});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("example 1234: id 10"));
  EXPECT_THAT(status.message(), HasSubstr("[0, 10)"));
  EXPECT_EQ(tables->num_touched(), 0);
  const std::vector<int32_t> negative = {-1, 0};
  EXPECT_THAT(tables->Touch(Rows(negative, 1), {3}).message(),
              HasSubstr("example 3: id -1"));
}

TEST(SparseTables, MirrorOfTheWrongShapeIsRefused) {
  TwoPs cluster(UpdateConfig::SYNC);
  std::unique_ptr<SparseTables> tables = cluster.Tables(cluster.ps_.get());
  Tensor small = Tensor::Create(DT_FLOAT, {kRows - 1, kWidth}).value();
  tables->Clear();
  EXPECT_EQ(tables->Pull(0, {{"embedding/embeddings", &small}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tables->Pull(0, {}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SparseTables, ModelWithoutTablesHasNone) {
  const ModelSpec spec =
      ParseKerasModel(R"({"class_name": "Sequential", "config": {
        "name": "s", "layers": [{"class_name": "Dense", "config": {
          "name": "dense", "units": 2, "batch_input_shape": [null, 4]}}]}})",
                      1)
          .value();
  PlacementOptions options;
  const Placement placement = ComputePlacement(spec.variables, options).value();
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  clients.push_back(std::make_unique<ps::PsClient>(
      CreatePstrainChannel("127.0.0.1:1"), ps::PsClientOptions()));
  std::unique_ptr<ps::PsClusterClient> ps =
      ps::PsClusterClient::Create(std::move(clients), placement, spec.variables)
          .value();
  std::unique_ptr<SparseTables> tables =
      SparseTables::Create(spec, placement, ps.get(), true).value();
  EXPECT_TRUE(tables->empty());
  EXPECT_TRUE(tables->Pull(0, {}).ok());
  EXPECT_TRUE(tables->Push(0, 1, {}).ok());
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

namespace pstrain {
namespace worker {
namespace {

// A growing table fed ids far above 2^31 (and one above 2^63 as uint64):
// the batch's distinct ids become local rows 0.. in the features, the
// mirror's rows are those ids' rows on the ps, and a push updates exactly
// those ids' rows there.
TEST(SparseTables, GrowingTableRemapsIdsToLocalRows) {
  TwoPs cluster(UpdateConfig::SYNC, 1, /*growing=*/true);
  constexpr int64_t kBatch = 2;
  std::unique_ptr<SparseTables> tables =
      cluster.Tables(cluster.ps_.get(), kBatch);
  EXPECT_EQ(tables->MirrorRows("embedding/embeddings"), kBatch * 2);
  const int64_t a = (int64_t{1} << 40) + 3;
  const int64_t b = static_cast<int64_t>(0xc3a5c85c97cb3127ull);  // < 0
  const int64_t c = (int64_t{1} << 35) + 8;
  // Rows {a, b} and {b, c}: local rows 0, 1, 1, 2.
  Tensor features = Tensor::Create(DT_FLOAT, {kBatch, 2}).value();
  Tensor wide = Tensor::Create(DT_INT64, {kBatch, 2}).value();
  const std::vector<int64_t> ids = {a, b, b, c};
  std::copy(ids.begin(), ids.end(), wide.data<int64_t>());
  tables->Clear();
  ASSERT_TRUE(tables->TouchAndRemap(&features, {0, 1}, &wide).ok());
  EXPECT_EQ(tables->num_touched(), 3);
  const float* f = features.data<float>();
  EXPECT_EQ(std::vector<float>(f, f + 4), (std::vector<float>{0, 1, 1, 2}));

  // What the ps holds for each key, before any step.
  const std::vector<int64_t> keys = {TableKey(a), TableKey(b), TableKey(c)};
  EXPECT_GE(keys[1], 0);
  std::vector<float> before(3 * kWidth);
  ASSERT_TRUE(
      cluster.ps_->PullSparse("embedding/embeddings", keys, 0, before.data())
          .ok());
  Tensor mirror = Tensor::Create(DT_FLOAT, {kBatch * 2, kWidth}).value();
  Tensor gradient = Tensor::Create(DT_FLOAT, {kBatch * 2, kWidth}).value();
  std::fill_n(mirror.flat<float>().data(), mirror.num_elements(), -99.0f);
  ASSERT_TRUE(tables->Pull(0, {{"embedding/embeddings", &mirror}}).ok());
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < kWidth; ++j) {
      EXPECT_EQ(mirror.flat<float>()[r * kWidth + j], before[r * kWidth + j])
          << r << "," << j;
    }
  }
  EXPECT_EQ(mirror.flat<float>()[3 * kWidth], -99.0f);  // No 4th id.
  for (int64_t i = 0; i < gradient.num_elements(); ++i) {
    gradient.flat<float>()[i] = 1.0f + i;
  }
  ASSERT_TRUE(
      tables->Push(0, kBatch, {{"embedding/embeddings", &gradient}}).ok());
  std::vector<float> after(3 * kWidth);
  ASSERT_TRUE(
      cluster.ps_->PullSparse("embedding/embeddings", keys, 1, after.data())
          .ok());
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < kWidth; ++j) {
      const float g = (1.0f + r * kWidth + j) / kBatch;
      EXPECT_FLOAT_EQ(after[r * kWidth + j],
                      before[r * kWidth + j] - kLearningRate * g)
          << r << "," << j;
    }
  }
}

TEST(SparseTables, GrowingTableRefusesMoreIdsThanItsMirror) {
  TwoPs cluster(UpdateConfig::SYNC, 1, /*growing=*/true);
  // Mirror of 2 rows (one example of 2 ids); a batch of 2 names 3 ids.
  std::unique_ptr<SparseTables> tables = cluster.Tables(cluster.ps_.get(), 1);
  Tensor features = Tensor::Create(DT_FLOAT, {2, 2}).value();
  Tensor wide = Tensor::Create(DT_INT64, {2, 2}).value();
  const std::vector<int64_t> ids = {int64_t{1} << 40, 5, 5, int64_t{1} << 41};
  std::copy(ids.begin(), ids.end(), wide.data<int64_t>());
  absl::Status status = tables->TouchAndRemap(&features, {7, 8}, &wide);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("example 8"));
  // Touch cannot write local rows.
  Tensor plain = Tensor::Create(DT_FLOAT, {1, 2}).value();
  tables->Clear();
  EXPECT_TRUE(absl::IsFailedPrecondition(tables->Touch(plain, {0})));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
