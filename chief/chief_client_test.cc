// ChiefClient against the chief's own RunState (LocalChiefConnection): a
// collective worker's all-reduce choice goes with every Register after it is
// set, so the chief refuses a worker that differs from the others, and a
// chief started again learns the choice when the workers register with it.
#include "chief/chief_client.h"

#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "chief/local_chief_connection.h"
#include "chief/run_state.h"
#include "common/tf_config.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

std::unique_ptr<RunState> CollectiveRun() {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      R"({"cluster": {"chief": ["h:1"], "worker": ["h:3", "h:4"]},
          "task": {"type": "chief", "index": 0}})");
  EXPECT_TRUE(tf.ok()) << tf.status();
  return std::make_unique<RunState>("run-1", TrainingConfig(), Placement(),
                                    tf->cluster, /*steps_per_epoch=*/10,
                                    /*total_steps=*/100, /*collective=*/true);
}

TEST(ChiefClient, SendsItsAllReduceChoiceInEveryLaterRegister) {
  std::unique_ptr<RunState> state = CollectiveRun();
  auto connection0 = std::make_unique<LocalChiefConnection>(state.get());
  auto connection1 = std::make_unique<LocalChiefConnection>(state.get());
  LocalChiefConnection* chief_side0 = connection0.get();
  LocalChiefConnection* chief_side1 = connection1.get();
  ChiefClient worker0(std::move(connection0), MakeTask(JOB_WORKER, 0));
  ChiefClient worker1(std::move(connection1), MakeTask(JOB_WORKER, 1));
  // Registered before either chose: nothing to compare.
  ASSERT_TRUE(worker0.Register(absl::Seconds(1)).ok());
  ASSERT_TRUE(worker1.Register(absl::Seconds(1)).ok());
  worker0.SetAllReduce("ring", "float32");
  ASSERT_TRUE(worker0.Register(absl::Seconds(1)).ok());
  worker1.SetAllReduce("nccl", "float32");
  absl::StatusOr<RegisterResponse> refused = worker1.Register(absl::Seconds(1));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(
      refused.status().message(),
      "worker:1 all-reduces with --allreduce_backend=nccl in float32, but "
      "worker:0, registered first, with ring in float32"))
      << refused.status();

  // A chief started again hears the choices anew: worker 1 comes first now.
  std::unique_ptr<RunState> restarted = CollectiveRun();
  chief_side0->Switch(restarted.get());
  chief_side1->Switch(restarted.get());
  ASSERT_TRUE(worker1.Register(absl::Seconds(1)).ok());
  refused = worker0.Register(absl::Seconds(1));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "worker:0 all-reduces with "
                                "--allreduce_backend=ring in float32, but "
                                "worker:1, registered first, with nccl"))
      << refused.status();
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
