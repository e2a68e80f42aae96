#include "chief/run_state.h"

#include "common/tf_config.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

RunState TwoWorkerRun(int64_t total_steps) {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"],
          "worker": ["h:3", "h:4"]}, "task": {"type": "chief", "index": 0}})");
  EXPECT_TRUE(tf.ok()) << tf.status();
  return RunState("run-1", TrainingConfig(), Placement(), tf->cluster,
                  /*steps_per_epoch=*/10, total_steps);
}

HeartbeatRequest Beat(int worker, int64_t step) {
  HeartbeatRequest request;
  request.mutable_header()->set_run_id("run-1");
  *request.mutable_header()->mutable_sender() = MakeTask(JOB_WORKER, worker);
  request.set_step(step);
  return request;
}

TEST(RunState, HeartbeatCarriesTheAnnouncedPauseStep) {
  RunState state = TwoWorkerRun(100);
  EXPECT_EQ(state.Heartbeat(Beat(0, 3))->pause_at_step(), 0);
  state.SetPauseAtStep(10);
  EXPECT_EQ(state.Heartbeat(Beat(0, 4))->pause_at_step(), 10);
  EXPECT_EQ(state.Heartbeat(Beat(1, 10))->pause_at_step(), 10);
  // Every worker at the pause step: the chief may save.
  EXPECT_EQ(state.WaitForStep(10, absl::Now()), 4);
  state.Heartbeat(Beat(0, 10)).IgnoreError();
  EXPECT_EQ(state.WaitForStep(10, absl::Now()), 10);
}

TEST(RunState, PauseAtNextStepIsOnePastTheHighestStartedStep) {
  RunState state = TwoWorkerRun(100);
  state.Heartbeat(Beat(0, 5)).IgnoreError();
  state.Heartbeat(Beat(1, 7)).IgnoreError();
  // Worker 1 may be computing step 7: it holds before step 8.
  EXPECT_EQ(state.PauseAtNextStep(), 8);
  EXPECT_EQ(state.Heartbeat(Beat(0, 6))->pause_at_step(), 8);
}

TEST(RunState, StartAtCountsEveryWorkerAtTheResumedStep) {
  RunState state = TwoWorkerRun(100);
  state.StartAt(40);
  EXPECT_EQ(state.start_step(), 40);
  EXPECT_EQ(state.WaitForStep(40, absl::Now()), 40);
  GetTrainingStateRequest request;
  request.mutable_header()->set_run_id("run-1");
  absl::StatusOr<TrainingState> training = state.GetTrainingState(request);
  ASSERT_TRUE(training.ok());
  EXPECT_EQ(training->start_step(), 40);
  EXPECT_EQ(training->step(), 40);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
