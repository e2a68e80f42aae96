#include "ps/ps_client.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
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

}  // namespace
}  // namespace ps
}  // namespace pstrain
