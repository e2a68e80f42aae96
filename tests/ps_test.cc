// The `ps` binary as real processes on 127.0.0.1, driven over gRPC.
#include <signal.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chief/checkpointer.h"
#include "common/atomic_file.h"
#include "common/cluster_spec.h"
#include "common/crc32c.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "ps/staleness.h"
#include "tests/ps_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr char kRun[] = "run-1";

std::string Log(Subprocess& p) { return ReadFile(p.log_path()); }

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PsBinary, ExitsTwoWithTheErrorLineOnBadTfConfig) {
  Subprocess bad = Subprocess::Start(
      "ps/ps", {"--tf_config={\"cluster\": {\"ps\": [\"h\"]}}"}, {},
      TempPath("bad.log"));
  EXPECT_EQ(bad.Wait(), 2);
  EXPECT_EQ(Log(bad),
            "TF_CONFIG: missing \"task\" (this process's {\"type\": ..., "
            "\"index\": ...})\n");

  Subprocess worker = Subprocess::Start(
      "ps/ps", {}, {{"TF_CONFIG", "{\"cluster\": {\"worker\": [\"h:1\"]}, "
                                  "\"task\": {\"type\": \"worker\", \"index\": 0}}"}},
      TempPath("worker.log"));
  EXPECT_EQ(worker.Wait(), 2);
  EXPECT_EQ(Log(worker),
            "TF_CONFIG: task.type: \"worker\", but this is the ps binary "
            "(expected \"ps\")\n");

  Subprocess flag = Subprocess::Start(
      "ps/ps", {"--nan_policy=ignore"},
      {{"TF_CONFIG", "{\"cluster\": {\"ps\": [\"127.0.0.1:1\"]}, "
                     "\"task\": {\"type\": \"ps\", \"index\": 0}}"}},
      TempPath("flag.log"));
  EXPECT_EQ(flag.Wait(), 2);
  EXPECT_EQ(Log(flag),
            "--nan_policy: \"ignore\" is not reject, skip_step or abort\n");

  // Checkpoints could not be written there: said at start, not at the
  // first checkpoint.
  const std::string file = TempPath("ps-a-file");
  ASSERT_TRUE(WriteFile(file, "x"));
  Subprocess dir =
      Subprocess::Start("ps/ps", {"--model_dir=" + file + "/run"},
                        {{"TF_CONFIG",
                          "{\"cluster\": {\"ps\": [\"127.0.0.1:1\"]}, "
                          "\"task\": {\"type\": \"ps\", \"index\": 0}}"}},
                        TempPath("dir.log"));
  EXPECT_EQ(dir.Wait(), 2);
  EXPECT_EQ(Log(dir), "--model_dir: mkdir " + file + "/run: Not a directory\n");

  const std::pair<std::string, std::string> cases[] = {
      {"--port=99999", "--port: 99999 must be in [0, 65535]"},
      {"--pull_threads=0", "--pull_threads: 0 must be in [1, 1024]"},
      {"--pull_threads=100000", "--pull_threads: 100000 must be in [1, 1024]"},
      {"--shutdown_grace_seconds=-1",
       "--shutdown_grace_seconds: -1 must be >= 0"},
      {"--chief_patience=0s", "--chief_patience: 0 must be > 0 (e.g. 10m)"},
  };
  for (const auto& [flag, line] : cases) {
    Subprocess ps =
        Subprocess::Start("ps/ps", {flag},
                          {{"TF_CONFIG",
                            "{\"cluster\": {\"ps\": [\"127.0.0.1:1\"]}, "
                            "\"task\": {\"type\": \"ps\", \"index\": 0}}"}},
                          TempPath("range.log"));
    EXPECT_EQ(ps.Wait(), 2) << flag;
    EXPECT_EQ(Log(ps), line + "\n");
  }
}

TEST(PsBinary, LogsItsRoleAndExitsZeroOnSigterm) {
  PsCluster cluster;
  ASSERT_TRUE(cluster.Start(1).ok());
  EXPECT_EQ(cluster.process(0).Terminate(), 0);
  const std::string log = Log(cluster.process(0));
  EXPECT_TRUE(Contains(log, "ps 0 of 1 listening on " + cluster.address(0)))
      << log;
  EXPECT_TRUE(Contains(log, "pstrain 0.1.0")) << log;
  EXPECT_TRUE(Contains(log, "SIGTERM, finishing in-flight requests")) << log;
}

TEST(PsBinary, ExitsAtOnceOnSigtermThoughAClientStaysConnected) {
  PsCluster cluster;
  ASSERT_TRUE(cluster.Start(1, {"--shutdown_grace_seconds=120"}).ok());
  std::unique_ptr<ps::PsClient> client = cluster.Client(0, "run", 0);
  client->GetShardStatus().IgnoreError();  // leaves an idle connection
  // gRPC's shutdown alone would wait out the 120 s grace for it.
  EXPECT_EQ(cluster.process(0).Stop(SIGTERM, /*timeout_seconds=*/30), 0);
}

// A model of two variables: "dense/kernel" [300, 64] split over both ps
// tasks, "dense/bias" [64] whole.
std::vector<VariableDef> Model() {
  return {ConstantVariable("dense/kernel", {300, 64}, 1.0f),
          ConstantVariable("dense/bias", {64}, 0.0f)};
}

PlacementOptions SplitKernel() {
  PlacementOptions options;
  options.rules = {{"kernel", 2}};
  return options;
}

struct Buffers {
  Tensor kernel = *Tensor::Create(DT_FLOAT, {300, 64});
  Tensor bias = *Tensor::Create(DT_FLOAT, {64});
  std::map<std::string, Tensor*> map() {
    return {{"dense/kernel", &kernel}, {"dense/bias", &bias}};
  }
  void Fill(float k, float b) {
    for (float& v : kernel.flat<float>()) v = k;
    for (float& v : bias.flat<float>()) v = b;
  }
};

class PsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.Start(2).ok()); }

  std::unique_ptr<ps::PsClusterClient> Connect(int worker,
                                               const std::string& run = kRun) {
    auto client = cluster_.Connect(run, worker, Model(), SplitKernel());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  void Create(const UpdateConfig& update) {
    ASSERT_TRUE(Connect(0)->CreateVariables(Sgd(0.5), update).ok());
  }

  PsCluster cluster_;
};

TEST_F(PsClusterTest, SyncStepsOverTwoPsTasks) {
  Create(Update(UpdateConfig::SYNC, 2));
  auto w0 = Connect(0), w1 = Connect(1);
  Buffers values, g0, g1;
  float kernel = 1.0f, bias = 0.0f;
  for (int step = 0; step < 3; ++step) {
    // Both workers pull step `step`, then push sums over batches 3 and 1.
    absl::StatusOr<int64_t> version = w0->PullDense(step, values.map());
    ASSERT_TRUE(version.ok()) << version.status();
    EXPECT_EQ(*version, step);
    EXPECT_EQ(values.kernel.flat<float>()[299 * 64 + 63], kernel);
    EXPECT_EQ(values.bias.flat<float>()[0], bias);
    g0.Fill(3, -1);
    g1.Fill(5, -3);
    std::thread other([&] { ASSERT_TRUE(w1->PushDense(step, 1, g1.map()).ok()); });
    ASSERT_TRUE(w0->PushDense(step, 3, g0.map()).ok());
    other.join();
    kernel -= 0.5f * (3 + 5) / 4;  // global batch 4
    bias -= 0.5f * (-1 - 3) / 4;
  }
  ASSERT_TRUE(w1->PullDense(3, values.map()).ok());
  for (float v : values.kernel.flat<float>()) ASSERT_EQ(v, kernel);
  for (float v : values.bias.flat<float>()) ASSERT_EQ(v, bias);
  EXPECT_EQ(kernel, -2.0f);
}

TEST_F(PsClusterTest, BackupWorkersLateGradientIsDroppedAndCounted) {
  Create(Update(UpdateConfig::SYNC, 3, /*replicas=*/2));
  auto w0 = Connect(0), w1 = Connect(1), w2 = Connect(2);
  Buffers g, values;
  g.Fill(2, 2);
  ASSERT_TRUE(w0->PushDense(0, 1, g.map()).ok());
  ASSERT_TRUE(w1->PushDense(0, 1, g.map()).ok());
  g.Fill(1000, 1000);
  ASSERT_TRUE(w2->PushDense(0, 1, g.map()).ok());  // late: dropped, not an error
  ASSERT_TRUE(w2->PullDense(1, values.map()).ok());
  EXPECT_EQ(values.kernel.flat<float>()[0], 1.0f - 0.5f * 4 / 2);
  for (int task = 0; task < 2; ++task) {
    absl::StatusOr<ShardStatus> status = w0->client(task)->GetShardStatus();
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(status->pushes_applied(), 2) << "ps " << task;
    EXPECT_EQ(status->pushes_dropped_stale(), 1) << "ps " << task;
  }
}

TEST_F(PsClusterTest, SyncStepMissingAWorkerTimesOutWithAClearStatus) {
  Create(Update(UpdateConfig::SYNC, 2, 0, -1, /*step_timeout_ms=*/300));
  auto w0 = Connect(0);
  Buffers g;
  ASSERT_TRUE(w0->PushDense(0, 1, g.map()).ok());
  absl::StatusOr<int64_t> pulled = w0->PullDense(1, g.map());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(std::string(pulled.status().message()),
                       "step 0 did not complete: 1 of 2 gradients arrived"))
      << pulled.status();
}

TEST_F(PsClusterTest, AsyncStalenessBoundRefusesOldGradients) {
  Create(Update(UpdateConfig::ASYNC, 2, 0, /*max_staleness=*/2));
  auto w0 = Connect(0);
  Buffers g;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(w0->PushDense(i, 1, g.map()).ok());
  const absl::Status stale = w0->PushDense(0, 1, g.map());
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(std::string(stale.message()),
                       "is too stale: the variable is at version 3, beyond 0 "
                       "+ max_staleness 2"))
      << stale;
  // The kind travels as a payload, not in the words (ps/staleness.h).
  EXPECT_TRUE(ps::IsStaleGradient(stale)) << stale;
  EXPECT_FALSE(ps::IsStaleGradient(
      absl::FailedPreconditionError(std::string(stale.message()))));
}

// Every bad request is refused with a status naming the problem, through
// gRPC, and changes nothing.
TEST_F(PsClusterTest, BadRequestsAreRefusedAndChangeNothing) {
  Create(Update(UpdateConfig::ASYNC, 1));
  auto good = Connect(0);
  Buffers before, after;
  ASSERT_TRUE(good->PullDense(0, before.map()).ok());
  std::unique_ptr<ps::PsClient> ps0 = cluster_.Client(0, kRun, 0);

  auto piece = [&](const std::string& name, std::vector<int64_t> dims,
                   int64_t rows, std::vector<float>* data) {
    ps::DensePiece p;
    p.name = name;
    for (int64_t d : dims) p.shape.add_dims(d);
    p.row_end = rows;
    p.data = reinterpret_cast<char*>(data->data());
    p.size = data->size() * 4;
    return p;
  };
  std::vector<float> bias(64, 1.0f);
  auto expect_refused = [&](ps::PsClient* client, std::vector<ps::DensePiece> g,
                            int64_t version, absl::StatusCode code,
                            const std::string& text) {
    absl::StatusOr<PushDenseResponse> r = client->PushDense(version, 1, g);
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_TRUE(Contains(std::string(r.status().message()), text)) << r.status();
  };
  expect_refused(cluster_.Client(0, "other-run", 0).get(),
                 {piece("dense/bias", {64}, 64, &bias)}, 0,
                 absl::StatusCode::kFailedPrecondition,
                 "the request's run id is not the run of ps 0");
  expect_refused(ps0.get(), {piece("dense/gamma", {64}, 64, &bias)}, 0,
                 absl::StatusCode::kInvalidArgument,
                 "variable 'dense/gamma': not held by ps 0");
  std::vector<float> short_bias(32, 1.0f);
  expect_refused(ps0.get(), {piece("dense/bias", {32}, 32, &short_bias)}, 0,
                 absl::StatusCode::kInvalidArgument,
                 "variable 'dense/bias': gradient shape [32] does not match "
                 "the variable's [64]");
  std::vector<float> nan_bias(64, 1.0f);
  nan_bias[7] = NAN;
  expect_refused(ps0.get(), {piece("dense/bias", {64}, 64, &nan_bias)}, 0,
                 absl::StatusCode::kInvalidArgument,
                 "variable 'dense/bias': gradient element 7 is NaN");
  expect_refused(ps0.get(), {piece("dense/bias", {64}, 64, &bias)}, 9,
                 absl::StatusCode::kAborted, "a version from the future");
  ASSERT_TRUE(cluster_.Client(0, "other-run", 0)->GetShardStatus().status().code() ==
              absl::StatusCode::kFailedPrecondition);

  // A message far beyond the limit is refused by gRPC before it is buffered.
  {
    auto stub = ParameterServer::NewStub(CreatePstrainChannel(cluster_.address(0)));
    grpc::ClientContext context;
    PushDenseResponse response;
    auto writer = stub->PushDense(&context, &response);
    PushDenseRequest huge;
    huge.mutable_header()->set_run_id(kRun);
    huge.set_batch_size(1);
    NamedTensor* g = huge.add_gradients();
    g->set_name("dense/bias");
    g->mutable_tensor()->mutable_content()->resize(kMaxGrpcMessageBytes + 1);
    writer->Write(huge);
    writer->WritesDone();
    const absl::Status status = FromGrpcStatus(writer->Finish());
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  }

  // Malformed messages no client of ours would send.
  auto raw_push = [&](const PushDenseRequest& message) {
    auto stub = ParameterServer::NewStub(CreatePstrainChannel(cluster_.address(0)));
    grpc::ClientContext context;
    PushDenseResponse response;
    auto writer = stub->PushDense(&context, &response);
    PushDenseRequest last = message;
    last.set_last(true);
    writer->Write(last);
    writer->WritesDone();
    return FromGrpcStatus(writer->Finish());
  };
  PushDenseRequest message;
  message.mutable_header()->set_run_id(kRun);
  message.set_batch_size(1);
  NamedTensor* g = message.add_gradients();
  g->set_name("dense/bias");
  g->mutable_tensor()->set_dtype(DT_FLOAT);
  g->mutable_tensor()->mutable_shape()->add_dims(64);
  g->mutable_tensor()->set_content(std::string(256, '\0'));
  const std::vector<std::pair<std::function<void(PushDenseRequest*)>, std::string>>
      malformed = {
          {[](PushDenseRequest* m) {
             m->mutable_gradients(0)->mutable_tensor()->set_dtype(DT_HALF);
           },
           "variable 'dense/bias': gradient dtype float16, expected float32"},
          {[](PushDenseRequest* m) {
             m->mutable_gradients(0)->mutable_tensor()->mutable_slice()->set_end(32);
           },
           "variable 'dense/bias': gradient rows [0, 32) but ps 0 holds rows "
           "[0, 64)"},
          {[](PushDenseRequest* m) {
             m->mutable_gradients(0)->mutable_tensor()->set_content_offset(4);
             m->mutable_gradients(0)->mutable_tensor()->mutable_content()->resize(252);
           },
           "variable 'dense/bias': gradient chunks overlap or leave a gap: a "
           "chunk starts at byte 4, expected byte 0"},
          {[](PushDenseRequest* m) { m->set_batch_size(0); },
           "batch_size 0 must be > 0"},
      };
  for (const auto& [mutate, text] : malformed) {
    PushDenseRequest bad = message;
    mutate(&bad);
    const absl::Status status = raw_push(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(status.message(), text);
  }

  ASSERT_TRUE(good->PullDense(0, after.map()).ok());
  EXPECT_EQ(std::memcmp(before.kernel.raw_data(), after.kernel.raw_data(),
                        before.kernel.num_bytes()), 0);
  EXPECT_EQ(std::memcmp(before.bias.raw_data(), after.bias.raw_data(),
                        before.bias.num_bytes()), 0);
  absl::StatusOr<ShardStatus> status = ps0->GetShardStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->pushes_applied(), 0);
  EXPECT_EQ(status->pushes_refused(), 9);
}

TEST_F(PsClusterTest, PullOfAnUnknownVariableNamesIt) {
  Create(Update(UpdateConfig::ASYNC, 1));
  std::unique_ptr<ps::PsClient> ps1 = cluster_.Client(1, kRun, 0);
  std::vector<float> data(64);
  ps::DensePiece p;
  p.name = "dense/bias";  // on ps 0, not ps 1
  p.data = reinterpret_cast<char*>(data.data());
  p.size = 256;
  absl::StatusOr<int64_t> r = ps1->PullDense(0, {&p, 1});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "variable 'dense/bias': not held by ps 1");
}

TEST_F(PsClusterTest, EightConcurrentSyncWorkersEqualTheSerialResult) {
  constexpr int kWorkers = 8, kSteps = 4;
  Create(Update(UpdateConfig::SYNC, kWorkers));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([this, w] {
      auto client = Connect(w);
      Buffers values, g;
      for (int step = 0; step < kSteps; ++step) {
        ASSERT_TRUE(client->PullDense(step, values.map()).ok());
        g.Fill(w, step);
        ASSERT_TRUE(client->PushDense(step, 2, g.map()).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Each step: kernel sum 0+...+7 = 28, bias sum 8 * step, batch 16.
  float kernel = 1.0f, bias = 0.0f;
  for (int step = 0; step < kSteps; ++step) {
    kernel -= 0.5f * 28 / 16;
    bias -= 0.5f * 8 * step / 16;
  }
  Buffers values;
  ASSERT_TRUE(Connect(0)->PullDense(kSteps, values.map()).ok());
  for (float v : values.kernel.flat<float>()) ASSERT_EQ(v, kernel);
  for (float v : values.bias.flat<float>()) ASSERT_EQ(v, bias);
}

TEST_F(PsClusterTest, EightConcurrentAsyncWorkersLoseNoUpdate) {
  constexpr int kWorkers = 8, kPushes = 25;
  Create(Update(UpdateConfig::ASYNC, kWorkers));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([this, w] {
      auto client = Connect(w);
      Buffers g;
      g.Fill(0.25f, 0.125f);  // lr 0.5: -1/8 and -1/16 per push
      for (int i = 0; i < kPushes; ++i) {
        ASSERT_TRUE(client->PushDense(0, 1, g.map()).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Buffers values;
  ASSERT_TRUE(Connect(0)->PullDense(0, values.map()).ok());
  for (float v : values.kernel.flat<float>()) {
    ASSERT_EQ(v, 1.0f - kWorkers * kPushes / 8.0f);
  }
  for (float v : values.bias.flat<float>()) {
    ASSERT_EQ(v, 0.0f - kWorkers * kPushes / 16.0f);
  }
}

// Each ps saves its shard through gRPC; after more training, restoring the
// checkpoint brings the values back, and a damaged file is refused.
TEST_F(PsClusterTest, SaveAndRestoreThroughGrpc) {
  Create(Update(UpdateConfig::ASYNC, 1));
  auto w0 = Connect(0);
  Buffers g, saved, values;
  g.Fill(1, 2);
  ASSERT_TRUE(w0->PushDense(0, 1, g.map()).ok());
  ASSERT_TRUE(w0->PullDense(0, saved.map()).ok());
  const std::string dir = "ckpt-1";  // in the ps tasks' --model_dir
  std::vector<SavedSlice> slices;
  for (int task = 0; task < 2; ++task) {
    absl::StatusOr<SaveResponse> r = w0->client(task)->Save(dir, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    slices.insert(slices.end(), r->slices().begin(), r->slices().end());
  }
  ASSERT_TRUE(w0->PushDense(1, 1, g.map()).ok());
  for (int task = 0; task < 2; ++task) {
    ASSERT_TRUE(w0->client(task)->Restore(dir, slices, 1, 0).ok());
  }
  ASSERT_TRUE(w0->PullDense(0, values.map()).ok());
  EXPECT_EQ(std::memcmp(values.kernel.raw_data(), saved.kernel.raw_data(),
                        saved.kernel.num_bytes()), 0);
  EXPECT_EQ(std::memcmp(values.bias.raw_data(), saved.bias.raw_data(),
                        saved.bias.num_bytes()), 0);

  {
    std::fstream f(cluster_.model_dir() + "/ckpt-1/ps-1.data",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x01');
  }
  const absl::Status damaged = w0->client(1)->Restore(dir, slices, 1, 0);
  EXPECT_EQ(damaged.code(), absl::StatusCode::kDataLoss) << damaged;
  // The refusal names the bytes that failed, not what they hold: the CRC32C
  // of what was read would give a caller the file's content.
  for (const SavedSlice& slice : slices) {
    if (slice.file() != "ps-1.data" || slice.offset() > 100 ||
        slice.offset() + slice.length() <= 100) {
      continue;
    }
    const std::string bytes =
        ReadFile(cluster_.model_dir() + "/ckpt-1/ps-1.data")
            .substr(slice.offset(), slice.length());
    const uint32_t crc = Crc32c(bytes.data(), bytes.size());
    EXPECT_FALSE(absl::StrContains(absl::AsciiStrToLower(damaged.message()),
                                   absl::StrFormat("%08x", crc)))
        << damaged;
    EXPECT_FALSE(absl::StrContains(damaged.message(), absl::StrCat(crc)))
        << damaged;
  }
}

// A run asking a ps for more than it may hold (an embedding of 2^40 rows) is
// refused before anything is allocated; the ps lives on and takes a run
// that fits.
TEST_F(PsClusterTest, OversizedCreateVariablesIsRefusedAndThePsLives) {
  VariableDef huge =
      ConstantVariable("embedding/embeddings", {int64_t{1} << 40, 1}, 0.0f);
  huge.set_sparse(true);
  auto client = cluster_.Connect("greedy-run", 0, {huge});
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Status refused =
      (*client)->CreateVariables(Sgd(0.5), Update(UpdateConfig::ASYNC, 1));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(Contains(std::string(refused.message()), "embedding/embeddings"))
      << refused;
  // Alive, and not claimed by the refused run.
  Create(Update(UpdateConfig::ASYNC, 1));
  auto w0 = Connect(0);
  Buffers values;
  EXPECT_TRUE(w0->PullDense(0, values.map()).ok());
}

// Save and Restore name a checkpoint inside the ps's --model_dir: a path
// anywhere else, absolute or climbing out, is refused before any file is
// touched, and the refusal says nothing of the file.
TEST_F(PsClusterTest, CheckpointPathsOutsideTheModelDirAreRefused) {
  Create(Update(UpdateConfig::ASYNC, 1));
  auto w0 = Connect(0);
  const std::string outside = TempPath("outside");
  ASSERT_TRUE(MakeDirectories(outside).ok());
  {
    std::ofstream secret(outside + "/ps-0.data");
    secret << std::string(64, 'k');
  }
  SavedSlice slice;
  slice.set_name("kernel");
  slice.set_file("ps-0.data");
  slice.set_length(64);
  slice.mutable_rows()->set_end(8);
  for (const std::string& dir :
       {outside, std::string("../outside"), std::string("ckpt-1/../../x"),
        std::string(".."), std::string("a/b"), std::string(""),
        std::string("/etc")}) {
    const absl::StatusOr<SaveResponse> saved = w0->client(0)->Save(dir, 0);
    EXPECT_EQ(saved.status().code(), absl::StatusCode::kInvalidArgument)
        << dir << ": " << saved.status();
    const absl::Status restored = w0->client(0)->Restore(dir, {slice}, 0, 0);
    EXPECT_EQ(restored.code(), absl::StatusCode::kInvalidArgument)
        << dir << ": " << restored;
    EXPECT_FALSE(absl::StrContains(restored.message(), "ps-0.data"))
        << restored;
    EXPECT_FALSE(absl::StrContains(restored.message(), "64")) << restored;
  }
  // Nothing was written outside the model_dir.
  EXPECT_FALSE(std::filesystem::exists(TempPath("x")));
  EXPECT_EQ(ReadFile(outside + "/ps-0.data"), std::string(64, 'k'));
}

// A ps task that cannot be reached, or holds no variables yet, while a
// checkpoint is restored says nothing about the checkpoint: the restore
// waits for it, rather than fall back to an older checkpoint (or fail).
TEST(CheckpointerOverGrpc, RestoreWaitsForAPsInsteadOfFallingBack) {
  PsCluster cluster;
  ASSERT_TRUE(cluster.Start(2).ok());
  const std::vector<VariableDef> variables = Model();
  PlacementOptions placement_options = SplitKernel();
  placement_options.num_ps = 2;
  const absl::StatusOr<Placement> placement =
      ComputePlacement(variables, placement_options);
  ASSERT_TRUE(placement.ok()) << placement.status();
  // The chief's client tries a call for a second only: the waiting is the
  // Checkpointer's.
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  for (int task = 0; task < 2; ++task) {
    ps::PsClientOptions options;
    options.run_id = kRun;
    options.sender = MakeTask(JOB_CHIEF, 0);
    options.retry.retry_for = absl::Seconds(1);
    clients.push_back(std::make_unique<ps::PsClient>(
        CreatePstrainChannel(cluster.address(task)), options));
  }
  absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> chief =
      ps::PsClusterClient::Create(std::move(clients), *placement, variables);
  ASSERT_TRUE(chief.ok()) << chief.status();
  const UpdateConfig update = Update(UpdateConfig::ASYNC, 1);
  ASSERT_TRUE((*chief)->CreateVariables(Sgd(0.5), update).ok());
  TrainingConfig config;
  config.set_model_name("dense");
  for (const VariableDef& v : variables) *config.add_variables() = v;
  chief::CheckpointerOptions options;
  options.model_dir = cluster.model_dir();
  options.run_id = kRun;
  chief::Checkpointer checkpointer(options, &config, &*placement, chief->get());

  Buffers g, at_1, values;
  g.Fill(1, 2);
  ASSERT_TRUE(checkpointer.Save(0, 0).ok());
  ASSERT_TRUE((*chief)->PushDense(0, 1, g.map()).ok());
  ASSERT_TRUE(checkpointer.Save(1, 0).ok());
  ASSERT_TRUE((*chief)->PullDense(0, at_1.map()).ok());
  ASSERT_TRUE((*chief)->PushDense(1, 1, g.map()).ok());

  // ps 1 restarts: until its variables are created again (3 s from now),
  // it answers UNAVAILABLE.
  ASSERT_TRUE(cluster.Restart(1).ok());
  std::thread create([&] {
    absl::SleepFor(absl::Seconds(3));
    auto again = cluster.Connect(kRun, 0, variables, SplitKernel());
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE((*again)->CreateVariables(Sgd(0.5), update).ok());
  });
  const absl::StatusOr<chief::LoadedCheckpoint> restored =
      checkpointer.RestoreLatest(/*generation=*/1);
  create.join();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->index.step(), 1);
  (*chief)->set_generation(1);
  ASSERT_TRUE((*chief)->PullDense(0, values.map()).ok());
  EXPECT_EQ(std::memcmp(values.kernel.raw_data(), at_1.kernel.raw_data(),
                        at_1.kernel.num_bytes()),
            0);
  EXPECT_EQ(std::memcmp(values.bias.raw_data(), at_1.bias.raw_data(),
                        at_1.bias.num_bytes()),
            0);
}

// A growing embedding table hashed over both ps tasks: rows are created on
// first touch, duplicates summed, only touched rows updated; bad ids are
// refused through gRPC.
TEST_F(PsClusterTest, SparseEmbeddingRowsAcrossTwoPsTasks) {
  VariableDef table = ConstantVariable("embedding/embeddings", {0, 4}, 0.5f);
  table.set_sparse(true);
  auto client = cluster_.Connect(kRun, 0, {table});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateVariables(Sgd(0.5), Update(UpdateConfig::ASYNC, 1)).ok());

  const std::vector<int64_t> ids = {7, 10, 7, 123456789};
  std::vector<float> rows(ids.size() * 4, -1.0f);
  ASSERT_TRUE((*client)->PullSparse("embedding/embeddings", ids, 0, rows.data()).ok());
  EXPECT_EQ(rows, std::vector<float>(16, 0.5f));

  // Gradient 1 per element for each listed id; id 7 twice: sum 2.
  std::vector<float> grads(ids.size() * 4, 1.0f);
  ASSERT_TRUE((*client)->PushSparse("embedding/embeddings", ids, grads.data(), 0, 1).ok());
  const std::vector<int64_t> check = {7, 10, 123456789, 8};
  std::vector<float> after(check.size() * 4);
  ASSERT_TRUE((*client)->PullSparse("embedding/embeddings", check, 0, after.data()).ok());
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(after[0 * 4 + j], 0.5f - 0.5f * 2);  // id 7
    EXPECT_EQ(after[1 * 4 + j], 0.0f);             // id 10
    EXPECT_EQ(after[2 * 4 + j], 0.0f);             // id 123456789
    EXPECT_EQ(after[3 * 4 + j], 0.5f);             // id 8: untouched, new
  }
  // Even ids went to ps 0, odd ids to ps 1: each applied one push.
  for (int task = 0; task < 2; ++task) {
    absl::StatusOr<ShardStatus> status = (*client)->client(task)->GetShardStatus();
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(status->variable_versions().at("embedding/embeddings"), 1)
        << "ps " << task;
    EXPECT_EQ(status->pushes_applied(), 1) << "ps " << task;
  }
  std::unique_ptr<ps::PsClient> ps0 = cluster_.Client(0, kRun, 0);
  const std::vector<float> one_row(4, 1.0f);
  const std::vector<int64_t> odd = {7};
  absl::StatusOr<PushSparseResponse> wrong =
      ps0->PushSparse("embedding/embeddings", odd, one_row, 4, 0, 1);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(),
            "variable 'embedding/embeddings': id 7 belongs to bucket 1 of 2, "
            "not this ps's bucket 0");
  absl::StatusOr<PullSparseResponse> unknown = ps0->PullSparse("nope", odd, 0);
  EXPECT_EQ(unknown.status().message(),
            "variable 'nope': not an embedding table held by ps 0");
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
