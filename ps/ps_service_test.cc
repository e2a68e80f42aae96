#include "ps/ps_service.h"

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
#include "gtest/gtest.h"
#include "ps/ps_client.h"

namespace pstrain {
namespace ps {
namespace {

TEST(PsService, ShuttingDownRefusesNewCallsAndWaitsForThoseInFlight) {
  Shard shard(ShardOptions{});
  PsService service(&shard, PsServiceOptions{});
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      StartPstrainServer("127.0.0.1:0", {&service}, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  PsClientOptions options;
  options.run_id = "run";
  options.retry.retry_for = absl::ZeroDuration();  // one attempt
  PsClient client(CreatePstrainChannel(absl::StrCat("127.0.0.1:", port)),
                  options);

  // A sync run of one worker: a pull of version 1 waits for a push.
  CreateVariablesRequest create;
  create.mutable_optimizer()->mutable_sgd();
  create.mutable_optimizer()->set_learning_rate(0.1);
  create.mutable_update()->set_mode(UpdateConfig::SYNC);
  create.mutable_update()->set_num_workers(1);
  ShardVariable* v = create.add_variables();
  v->mutable_def()->set_name("w");
  v->mutable_def()->set_dtype(DT_FLOAT);
  v->mutable_def()->mutable_shape()->add_dims(2);
  v->mutable_def()->mutable_initializer()->mutable_zeros();
  v->mutable_placement()->set_name("w");
  v->mutable_placement()->set_partitioning(VariablePlacement::WHOLE);
  v->mutable_placement()->add_slices()->set_row_end(2);
  CreateVariablesResponse created;
  const absl::Status status = client.CreateVariables(create, &created);
  ASSERT_TRUE(status.ok()) << status;

  float w[2];
  DensePiece piece;
  piece.name = "w";
  piece.shape = v->def().shape();
  piece.row_end = 2;
  piece.data = reinterpret_cast<char*>(w);
  piece.size = sizeof(w);
  // CreateVariables is done once its reactor is (after its reply).
  ASSERT_TRUE(service.WaitUntilIdle(absl::Now() + absl::Seconds(30)));
  absl::StatusOr<int64_t> pulled;
  std::thread pull([&] { pulled = client.PullDense(1, {piece}); });
  // Until the pull arrives the service is idle.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (service.WaitUntilIdle(absl::Now()) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }

  service.RefuseNewCalls();
  EXPECT_FALSE(service.WaitUntilIdle(absl::Now() + absl::Milliseconds(100)));
  PsClient other(CreatePstrainChannel(absl::StrCat("127.0.0.1:", port)),
                 options);
  const absl::Status refused = other.GetShardStatus().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_EQ(refused.message(), "ps 0 is shutting down");

  shard.InterruptPulls("stopping");
  EXPECT_TRUE(service.WaitUntilIdle(absl::Now() + absl::Seconds(30)));
  pull.join();
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kAborted)
      << pulled.status();
  (*server)->Shutdown(absl::ToChronoTime(absl::Now()));
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
