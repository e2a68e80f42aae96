#include "ps/ps_service.h"

#include <array>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "common/metrics.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/health.pb.h"
#include "ps/ps_client.h"
#include "ps/ps_metrics.h"

namespace pstrain {
namespace ps {
namespace {

// Creates a float variable "w" of 2 zeros in a run of `workers` workers.
CreateVariablesRequest CreateW(UpdateConfig::Mode mode, int workers = 1) {
  CreateVariablesRequest create;
  create.mutable_optimizer()->mutable_sgd();
  create.mutable_optimizer()->set_learning_rate(0.1);
  create.mutable_update()->set_mode(mode);
  create.mutable_update()->set_num_workers(workers);
  create.mutable_update()->set_max_staleness(-1);
  ShardVariable* v = create.add_variables();
  v->mutable_def()->set_name("w");
  v->mutable_def()->set_dtype(DT_FLOAT);
  v->mutable_def()->mutable_shape()->add_dims(2);
  v->mutable_def()->mutable_initializer()->mutable_zeros();
  v->mutable_placement()->set_name("w");
  v->mutable_placement()->set_partitioning(VariablePlacement::WHOLE);
  v->mutable_placement()->add_slices()->set_row_end(2);
  return create;
}

// A call of `method` at `address` as a stream of `requests`, whichever
// kind of method it is (on the wire they differ only in how many messages
// each side sends). Sets *replies.
absl::Status RawCall(const std::string& address, const std::string& method,
                     const std::vector<std::string>& requests,
                     std::vector<std::string>* replies) {
  auto channel = CreatePstrainChannel(address);
  const grpc::internal::RpcMethod rpc(
      method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream(grpc::internal::ClientReaderWriterFactory<
             grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), rpc,
                                                         &context));
  for (const std::string& request : requests) {
    grpc::Slice slice(request);
    stream->Write(grpc::ByteBuffer(&slice, 1));
  }
  stream->WritesDone();
  replies->clear();
  grpc::ByteBuffer reply;
  while (stream->Read(&reply)) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(reply.Dump(&slices).ok());
    std::string& bytes = replies->emplace_back();
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return FromGrpcStatus(stream->Finish());
}

// A shard served on a port picked at run time.
class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    const absl::Status started = service_.Start("127.0.0.1:0", &port);
    ASSERT_TRUE(started.ok()) << started;
    address_ = absl::StrCat("127.0.0.1:", port);
  }

  Shard shard_{ShardOptions{}};
  PsService service_{&shard_, PsServiceOptions{}};
  std::string address_;
};

// The piece "w" of CreateW, read into or pushed from `w`.
DensePiece PieceOfW(float (&w)[2]) {
  DensePiece piece;
  piece.name = "w";
  piece.shape.add_dims(2);
  piece.row_end = 2;
  piece.data = reinterpret_cast<char*>(w);
  piece.size = sizeof(w);
  return piece;
}

TEST_F(PsServiceTest, ShuttingDownRefusesNewCallsAndWaitsForThoseInFlight) {
  PsClientOptions options;
  options.run_id = "run";
  options.retry.retry_for = absl::ZeroDuration();  // one attempt
  PsClient client(CreatePstrainChannel(address_), options);

  // A sync run of one worker: a pull of version 1 waits for a push.
  const CreateVariablesRequest create = CreateW(UpdateConfig::SYNC);
  CreateVariablesResponse created;
  const absl::Status status = client.CreateVariables(create, &created);
  ASSERT_TRUE(status.ok()) << status;

  float w[2];
  const DensePiece piece = PieceOfW(w);
  // CreateVariables is done once its call is (after its reply).
  ASSERT_TRUE(service_.WaitUntilIdle(absl::Now() + absl::Seconds(30)));
  absl::StatusOr<int64_t> pulled;
  std::thread pull([&] { pulled = client.PullDense(1, {piece}); });
  // Until the pull arrives the service is idle.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (service_.WaitUntilIdle(absl::Now()) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }

  service_.RefuseNewCalls();
  EXPECT_FALSE(service_.WaitUntilIdle(absl::Now() + absl::Milliseconds(100)));
  PsClient other(CreatePstrainChannel(address_), options);
  const absl::Status refused = other.GetShardStatus().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_EQ(refused.message(), "ps 0 is shutting down");

  shard_.InterruptPulls("stopping");
  EXPECT_TRUE(service_.WaitUntilIdle(absl::Now() + absl::Seconds(30)));
  pull.join();
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kAborted)
      << pulled.status();
  service_.Stop();
}

TEST_F(PsServiceTest, AnswersTheHealthCheckItself) {
  auto check = [&](const std::string& name, HealthCheckResponse* response) {
    HealthCheckRequest request;
    request.set_service(name);
    std::vector<std::string> replies;
    const absl::Status status =
        RawCall(address_, "/grpc.health.v1.Health/Check",
                {request.SerializeAsString()}, &replies);
    if (status.ok()) {
      EXPECT_EQ(replies.size(), 1u);
      EXPECT_TRUE(response->ParseFromString(replies.at(0)));
    }
    return status;
  };
  HealthCheckResponse response;
  for (const std::string name : {"", "pstrain.ParameterServer"}) {
    ASSERT_TRUE(check(name, &response).ok()) << name;
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << name;
  }
  const absl::Status unknown = check("other.Service", &response);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound) << unknown;
  EXPECT_NE(unknown.message().find("other.Service"), std::string::npos);

  // Shutting down: not serving, but still answering.
  service_.RefuseNewCalls();
  ASSERT_TRUE(check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
}

TEST_F(PsServiceTest, RefusesIncompletePushStreamsAndMalformedCalls) {
  const std::string& address = address_;
  PsClientOptions options;
  options.run_id = "run";
  PsClient client(CreatePstrainChannel(address), options);
  CreateVariablesResponse created;
  ASSERT_TRUE(client.CreateVariables(CreateW(UpdateConfig::ASYNC), &created).ok());

  PushDenseRequest push;
  push.mutable_header()->set_run_id("run");
  push.set_batch_size(1);
  NamedTensor* g = push.add_gradients();
  g->set_name("w");
  g->mutable_tensor()->set_dtype(DT_FLOAT);
  g->mutable_tensor()->mutable_shape()->add_dims(2);
  const float ones[2] = {1, 1};
  g->mutable_tensor()->set_content(reinterpret_cast<const char*>(ones),
                                   sizeof(ones));
  PushDenseRequest last = push;
  last.set_last(true);
  const std::string method = "/pstrain.ParameterServer/PushDense";
  std::vector<std::string> replies;
  // A stream cut before its last message (here: none is marked last), and
  // one that goes on after it, change nothing.
  absl::Status status =
      RawCall(address, method, {push.SerializeAsString()}, &replies);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("ended before its message marked last"),
            std::string::npos)
      << status;
  status = RawCall(address, method,
                   {last.SerializeAsString(), last.SerializeAsString()},
                   &replies);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  status = RawCall(address, method, {}, &replies);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  // A stream far larger than the shard's variables is cut off as it comes.
  PushDenseRequest big = push;
  big.mutable_gradients(0)->mutable_tensor()->mutable_content()->resize(8 << 20);
  const std::string big_bytes = big.SerializeAsString();
  status = RawCall(address, method, {big_bytes, big_bytes, big_bytes},
                   &replies);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  absl::StatusOr<ShardStatus> shard_status = client.GetShardStatus();
  ASSERT_TRUE(shard_status.ok()) << shard_status.status();
  EXPECT_EQ(shard_status->variable_versions().at("w"), 0);

  // Two requests to a method that takes one; a method a ps does not have.
  GetShardStatusRequest get;
  get.mutable_header()->set_run_id("run");
  status = RawCall(address, "/pstrain.ParameterServer/GetShardStatus",
                   {get.SerializeAsString(), get.SerializeAsString()},
                   &replies);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  status = RawCall(address, "/pstrain.ParameterServer/Train",
                   {get.SerializeAsString()}, &replies);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;

  // The complete push is applied, once: w = 0 - 0.1 * 1.
  status = RawCall(address, method, {last.SerializeAsString()}, &replies);
  ASSERT_TRUE(status.ok()) << status;
  float w[2] = {0, 0};
  const absl::StatusOr<int64_t> version = client.PullDense(0, {PieceOfW(w)});
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  EXPECT_FLOAT_EQ(w[0], -0.1f);
  EXPECT_FLOAT_EQ(w[1], -0.1f);
}

// 32 sync workers each pull step 1 (which waits for the step) before they
// push; there are 2 threads for waiting pulls, and every push is served on
// a pool (large_push_bytes 0, as pushes of 64 MB are). The pushes never
// queue behind the waiting pulls, so the step completes and every pull is
// answered; sharing one pool, 30 pushes would wait behind 30 pulls, each
// waiting for its step until the step timeout.
// With metrics, each pull and push of an embedding table is counted under
// the table's name, as dense variables are.
TEST(PsServiceMetrics, CountsPullsAndPushesOfEachTable) {
  MetricsRegistry registry;
  PsMetrics metrics(&registry);
  Shard shard{ShardOptions{}};
  PsServiceOptions options;
  options.metrics = &metrics;
  PsService service(&shard, options);
  int port = 0;
  ASSERT_TRUE(service.Start("127.0.0.1:0", &port).ok());
  PsClientOptions client_options;
  client_options.run_id = "run";
  PsClient client(CreatePstrainChannel(absl::StrCat("127.0.0.1:", port)),
                  client_options);
  CreateVariablesRequest create = CreateW(UpdateConfig::ASYNC);
  ShardVariable* table = create.add_variables();
  table->mutable_def()->set_name("emb");
  table->mutable_def()->set_dtype(DT_FLOAT);
  table->mutable_def()->set_sparse(true);
  table->mutable_def()->mutable_shape()->add_dims(4);
  table->mutable_def()->mutable_shape()->add_dims(2);
  table->mutable_def()->mutable_initializer()->mutable_zeros();
  table->mutable_placement()->set_name("emb");
  table->mutable_placement()->set_partitioning(VariablePlacement::WHOLE);
  table->mutable_placement()->add_slices()->set_row_end(4);
  CreateVariablesResponse created;
  const absl::Status status = client.CreateVariables(create, &created);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<int64_t> ids = {1, 3};
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<PullSparseResponse> pulled =
        client.PullSparse("emb", ids, 0);
    ASSERT_TRUE(pulled.ok()) << pulled.status();
  }
  const std::vector<float> rows = {1, 1, 1, 1};
  absl::StatusOr<PushSparseResponse> pushed =
      client.PushSparse("emb", ids, rows, 2, 0, 1);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  const std::string text = registry.Render();
  EXPECT_NE(text.find("pstrain_ps_pulls_total{variable=\"emb\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pstrain_ps_pushes_total{variable=\"emb\"} 1"),
            std::string::npos)
      << text;
  service.Stop();
}

TEST(PsServicePools, WaitingPullsDoNotHoldBackThePushesTheyWaitFor) {
  constexpr int kWorkers = 32;
  Shard shard{ShardOptions{}};
  PsServiceOptions service_options;
  service_options.pull_threads = 2;
  service_options.large_push_bytes = 0;
  PsService service(&shard, service_options);
  int port = 0;
  ASSERT_TRUE(service.Start("127.0.0.1:0", &port).ok());
  const std::string address = absl::StrCat("127.0.0.1:", port);

  auto client = [&](int worker) {
    PsClientOptions options;
    options.run_id = "run";
    options.sender.set_job(JOB_WORKER);
    options.sender.set_index(worker);
    return std::make_unique<PsClient>(CreatePstrainChannel(address), options);
  };
  CreateVariablesRequest create = CreateW(UpdateConfig::SYNC, kWorkers);
  create.mutable_update()->set_step_timeout_ms(20000);
  CreateVariablesResponse created;
  ASSERT_TRUE(client(0)->CreateVariables(create, &created).ok());

  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < kWorkers; ++w) clients.push_back(client(w));
  std::vector<absl::StatusOr<int64_t>> pulled(kWorkers);
  std::vector<absl::Status> pushed(kWorkers);
  std::vector<std::array<float, 2>> values(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      float(&into)[2] = *reinterpret_cast<float(*)[2]>(values[w].data());
      pulled[w] = clients[w]->PullDense(1, {PieceOfW(into)});
    });
  }
  // Let the pulls arrive and fill the pull threads first.
  absl::SleepFor(absl::Milliseconds(500));
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      float g[2] = {1, 1};
      pushed[w] = clients[w]->PushDense(0, 1, {PieceOfW(g)}).status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_TRUE(pushed[w].ok()) << w << ": " << pushed[w];
    ASSERT_TRUE(pulled[w].ok()) << w << ": " << pulled[w].status();
    EXPECT_EQ(*pulled[w], 1);
    // The mean gradient 1, once: w = 0 - 0.1.
    EXPECT_FLOAT_EQ(values[w][0], -0.1f) << w;
  }
}

// A sync sparse pull whose step is complete when it arrives waits for
// nothing: it is answered at once, not queued behind pulls that wait (here
// a dense pull holding the one pull thread until its step completes).
TEST(PsServicePools, SparsePullsOfACompleteStepAreNotQueuedBehindWaitingOnes) {
  Shard shard{ShardOptions{}};
  PsServiceOptions service_options;
  service_options.pull_threads = 1;
  PsService service(&shard, service_options);
  int port = 0;
  ASSERT_TRUE(service.Start("127.0.0.1:0", &port).ok());
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto client = [&](int worker, absl::Duration timeout) {
    PsClientOptions options;
    options.run_id = "run";
    options.sender.set_job(JOB_WORKER);
    options.sender.set_index(worker);
    options.timeout = timeout;
    return std::make_unique<PsClient>(CreatePstrainChannel(address), options);
  };
  CreateVariablesRequest create = CreateW(UpdateConfig::SYNC, 2);
  create.mutable_update()->set_step_timeout_ms(60000);
  ShardVariable* table = create.add_variables();
  table->mutable_def()->set_name("emb");
  table->mutable_def()->set_dtype(DT_FLOAT);
  table->mutable_def()->set_sparse(true);
  table->mutable_def()->mutable_shape()->add_dims(4);
  table->mutable_def()->mutable_shape()->add_dims(2);
  table->mutable_def()->mutable_initializer()->mutable_zeros();
  table->mutable_placement()->set_name("emb");
  table->mutable_placement()->set_partitioning(VariablePlacement::WHOLE);
  table->mutable_placement()->add_slices()->set_row_end(4);
  CreateVariablesResponse created;
  ASSERT_TRUE(
      client(0, absl::Seconds(60))->CreateVariables(create, &created).ok());
  std::unique_ptr<PsClient> workers[2] = {client(0, absl::Seconds(60)),
                                          client(1, absl::Seconds(60))};
  // Step 0 of the table, from both workers: it is at version 1.
  const std::vector<int64_t> ids = {1, 3};
  const std::vector<float> rows = {1, 1, 1, 1};
  for (auto& worker : workers) {
    worker->set_step(0, {});
    absl::StatusOr<PushSparseResponse> pushed =
        worker->PushSparse("emb", ids, rows, 2, 0, 1);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
  }
  // A dense pull of step 1 waits on the one pull thread: "w" has no push.
  float waited[2] = {};
  absl::StatusOr<int64_t> dense;
  std::thread waiting(
      [&] { dense = workers[0]->PullDense(1, {PieceOfW(waited)}); });
  absl::SleepFor(absl::Milliseconds(300));
  // Queued behind it, this pull would wait out its deadline.
  absl::StatusOr<PullSparseResponse> pulled =
      client(1, absl::Seconds(5))->PullSparse("emb", ids, 1);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->version(), 1);
  ASSERT_EQ(pulled->values().shape().dims(0), 2);
  const float* values =
      reinterpret_cast<const float*>(pulled->values().content().data());
  // The mean gradient 1 of both workers, once, by plain SGD: 0 - 0.1.
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(values[i], -0.1f) << i;
  // The dense step completes, and the waiting pull with it.
  for (auto& worker : workers) {
    float g[2] = {1, 1};
    ASSERT_TRUE(worker->PushDense(0, 1, {PieceOfW(g)}).ok());
  }
  waiting.join();
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(*dense, 1);
  service.Stop();
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
