#include "ps/ps_client.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
#include "common/metrics.h"
#include "common/placement.h"
#include "gtest/gtest.h"
#include "ps/ps_service.h"

namespace pstrain {
namespace ps {
namespace {

// A ps task that goes away and comes back at the same address: a dense push
// or pull meanwhile is tried again until it is back (each attempt after the
// first counted by RetryOptions::on_retry), and a push is applied once.
TEST(PsClusterClient, DenseCallsWaitForAPsThatComesBack) {
  Shard shard(ShardOptions{});
  PsService first(&shard, PsServiceOptions{});
  int port = 0;
  const absl::Status started = first.Start("127.0.0.1:0", &port);
  ASSERT_TRUE(started.ok()) << started;
  const std::string address = absl::StrCat("127.0.0.1:", port);

  VariableDef w;
  w.set_name("w");
  w.set_dtype(DT_FLOAT);
  w.mutable_shape()->add_dims(1000);
  w.mutable_initializer()->mutable_constant()->set_value(1.0f);
  absl::StatusOr<Placement> placement = ComputePlacement({w}, PlacementOptions{});
  ASSERT_TRUE(placement.ok()) << placement.status();
  PsClientOptions options;
  options.run_id = "run";
  options.sender.set_job(JOB_WORKER);
  std::atomic<int> retries{0};
  options.retry.on_retry = [&retries] { ++retries; };
  std::vector<std::unique_ptr<PsClient>> clients;
  clients.push_back(
      std::make_unique<PsClient>(CreatePstrainChannel(address), options));
  absl::StatusOr<std::unique_ptr<PsClusterClient>> cluster =
      PsClusterClient::Create(std::move(clients), *placement, {w});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  OptimizerConfig sgd;
  sgd.mutable_sgd();
  sgd.set_learning_rate(0.5);
  UpdateConfig async;
  async.set_mode(UpdateConfig::ASYNC);
  async.set_num_workers(1);
  async.set_max_staleness(-1);
  ASSERT_TRUE((*cluster)->CreateVariables(sgd, async).ok());

  // Gone; back 300 ms later (a new service over the same shard).
  first.Stop();
  PsService second(&shard, PsServiceOptions{});
  absl::Status restarted;
  std::thread restart([&] {
    absl::SleepFor(absl::Milliseconds(300));
    int bound = 0;
    restarted = second.Start(address, &bound);
  });
  Tensor g = *Tensor::Create(DT_FLOAT, {1000});
  for (float& v : g.flat<float>()) v = 1.0f;
  const absl::Status pushed = (*cluster)->PushDense(0, 1, {{"w", &g}});
  restart.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  EXPECT_TRUE(pushed.ok()) << pushed;
  EXPECT_GE(retries.load(), 1);

  Tensor value = *Tensor::Create(DT_FLOAT, {1000});
  absl::StatusOr<int64_t> version = (*cluster)->PullDense(0, {{"w", &value}});
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  EXPECT_EQ(std::vector<float>(value.flat<float>().begin(),
                               value.flat<float>().end()),
            std::vector<float>(1000, 0.5f));
}

// The client counts the serialized messages of a push and a pull of a
// variable of 1000 floats: its 4000 bytes of content each way and a little
// description (name, shape, header), and the pull's short request.
TEST(PsClusterClient, CountsTheBytesItSendsAndReceives) {
  Shard shard(ShardOptions{});
  PsService service(&shard, PsServiceOptions{});
  int port = 0;
  const absl::Status started = service.Start("127.0.0.1:0", &port);
  ASSERT_TRUE(started.ok()) << started;
  VariableDef w;
  w.set_name("w");
  w.set_dtype(DT_FLOAT);
  w.mutable_shape()->add_dims(1000);
  w.mutable_initializer()->mutable_constant()->set_value(1.0f);
  absl::StatusOr<Placement> placement =
      ComputePlacement({w}, PlacementOptions{});
  ASSERT_TRUE(placement.ok()) << placement.status();
  Counter sent, received;
  PsClientOptions options;
  options.run_id = "run";
  options.sender.set_job(JOB_WORKER);
  options.bytes_sent = &sent;
  options.bytes_received = &received;
  std::vector<std::unique_ptr<PsClient>> clients;
  clients.push_back(std::make_unique<PsClient>(
      CreatePstrainChannel(absl::StrCat("127.0.0.1:", port)), options));
  absl::StatusOr<std::unique_ptr<PsClusterClient>> cluster =
      PsClusterClient::Create(std::move(clients), *placement, {w});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  OptimizerConfig sgd;
  sgd.mutable_sgd();
  sgd.set_learning_rate(0.5);
  UpdateConfig async;
  async.set_mode(UpdateConfig::ASYNC);
  async.set_num_workers(1);
  async.set_max_staleness(-1);
  ASSERT_TRUE((*cluster)->CreateVariables(sgd, async).ok());
  EXPECT_EQ(sent.Value(), 0);  // not a push or a pull
  EXPECT_EQ(received.Value(), 0);

  Tensor g = *Tensor::Create(DT_FLOAT, {1000});
  for (float& v : g.flat<float>()) v = 1.0f;
  ASSERT_TRUE((*cluster)->PushDense(0, 1, {{"w", &g}}).ok());
  const double pushed = sent.Value();
  EXPECT_GE(pushed, 4000);
  EXPECT_LT(pushed, 4000 + 200);
  EXPECT_EQ(received.Value(), 0);  // a push's reply is not counted

  Tensor value = *Tensor::Create(DT_FLOAT, {1000});
  ASSERT_TRUE((*cluster)->PullDense(0, {{"w", &value}}).ok());
  const double request = sent.Value() - pushed;
  EXPECT_GT(request, 0);
  EXPECT_LT(request, 200);
  const double pulled = received.Value();
  EXPECT_GE(pulled, 4000);
  EXPECT_LT(pulled, 4000 + 200);
  // A second pull moves the same again.
  ASSERT_TRUE((*cluster)->PullDense(0, {{"w", &value}}).ok());
  EXPECT_EQ(received.Value(), 2 * pulled);
  EXPECT_EQ(sent.Value(), pushed + 2 * request);
  service.Stop();
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
