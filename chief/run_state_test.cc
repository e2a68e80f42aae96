#include "chief/run_state.h"

#include "absl/strings/match.h"
#include "common/tf_config.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

RunState TwoWorkerRun(int64_t total_steps, bool collective = false) {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"],
          "worker": ["h:3", "h:4"]}, "task": {"type": "chief", "index": 0}})");
  EXPECT_TRUE(tf.ok()) << tf.status();
  return RunState("run-1", TrainingConfig(), Placement(), tf->cluster,
                  /*steps_per_epoch=*/10, total_steps, collective);
}

absl::StatusOr<RegisterResponse> Join(RunState& state, TaskRef task,
                                      uint64_t incarnation = 1) {
  RegisterRequest request;
  *request.mutable_header()->mutable_sender() = task;
  request.set_incarnation(incarnation);
  return state.Register(request);
}

// Every ps and worker of TwoWorkerRun registered.
void JoinAll(RunState& state) {
  ASSERT_TRUE(Join(state, MakeTask(JOB_PS, 0)).ok());
  ASSERT_TRUE(Join(state, MakeTask(JOB_WORKER, 0)).ok());
  ASSERT_TRUE(Join(state, MakeTask(JOB_WORKER, 1)).ok());
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
  JoinAll(state);
  EXPECT_EQ(state.Heartbeat(Beat(0, 3))->pause_at_step(), 0);
  state.SetPauseAtStep(10);
  EXPECT_EQ(state.Heartbeat(Beat(0, 4))->pause_at_step(), 10);
  EXPECT_EQ(state.Heartbeat(Beat(1, 10))->pause_at_step(), 10);
  // Every worker at the pause step: the chief may save.
  EXPECT_EQ(state.WaitForStep(10, absl::Now()), 4);
  state.Heartbeat(Beat(0, 10)).IgnoreError();
  EXPECT_EQ(state.WaitForStep(10, absl::Now()), 10);
}

TEST(RunState, HandsOutWorkerZerosNcclIdForItsGenerationOnly) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  EXPECT_TRUE(state.Heartbeat(Beat(1, 0))->nccl_unique_id().empty());
  HeartbeatRequest publish = Beat(0, 0);
  publish.set_nccl_unique_id("id-of-gen-0");
  publish.set_nccl_generation(0);
  EXPECT_EQ(state.Heartbeat(publish)->nccl_unique_id(), "id-of-gen-0");
  EXPECT_EQ(state.Heartbeat(Beat(1, 0))->nccl_unique_id(), "id-of-gen-0");
  // Only worker 0 publishes, and ids are small.
  HeartbeatRequest other = Beat(1, 0);
  other.set_nccl_unique_id("x");
  EXPECT_EQ(state.Heartbeat(other).status().code(),
            absl::StatusCode::kInvalidArgument);
  publish.set_nccl_unique_id(
      std::string(RunState::kMaxNcclUniqueIdBytes + 1, 'x'));
  EXPECT_EQ(state.Heartbeat(publish).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A restore makes a new generation, whose communicator needs a new id:
  // the old one is no longer handed out, nor a late one for the old.
  state.Recovered(0, 1);
  EXPECT_TRUE(state.Heartbeat(Beat(1, 0))->nccl_unique_id().empty());
  publish.set_nccl_unique_id("late-for-gen-0");
  EXPECT_TRUE(state.Heartbeat(publish)->nccl_unique_id().empty());
  publish.set_nccl_unique_id("id-of-gen-1");
  publish.set_nccl_generation(1);
  publish.mutable_header()->set_generation(1);
  EXPECT_EQ(state.Heartbeat(publish)->nccl_unique_id(), "id-of-gen-1");
  EXPECT_EQ(state.Heartbeat(Beat(1, 0))->nccl_unique_id(), "id-of-gen-1");
}

HeartbeatRequest PsBeat() {
  HeartbeatRequest request;
  request.mutable_header()->set_run_id("run-1");
  *request.mutable_header()->mutable_sender() = MakeTask(JOB_PS, 0);
  return request;
}

TEST(RunState, WaitsUntilEveryTaskHeardThatTheRunIsOver) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  state.Heartbeat(Beat(0, 3)).IgnoreError();  // before the end: not told
  state.SetPhase(PHASE_FINISHED);
  EXPECT_FALSE(state.WaitUntilToldOver(absl::Now()));
  EXPECT_EQ(state.Heartbeat(Beat(0, 100))->phase(), PHASE_FINISHED);
  EXPECT_EQ(state.Heartbeat(Beat(1, 100))->phase(), PHASE_FINISHED);
  EXPECT_FALSE(state.WaitUntilToldOver(absl::Now()));  // the ps not yet
  EXPECT_EQ(state.Heartbeat(PsBeat())->phase(), PHASE_FINISHED);
  EXPECT_TRUE(state.WaitUntilToldOver(absl::Now()));
}

TEST(RunState, ATaskPresumedDeadIsNotWaitedForToHearTheRunIsOver) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  state.SetPhase(PHASE_FAILED);
  absl::SleepFor(absl::Milliseconds(300));
  state.Heartbeat(Beat(0, 7)).IgnoreError();
  state.Heartbeat(PsBeat()).IgnoreError();
  EXPECT_FALSE(state.WaitUntilToldOver(absl::Now()));
  const std::vector<TaskRef> dead = state.FindDeadTasks(absl::Milliseconds(250));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].index(), 1);
  EXPECT_TRUE(state.WaitUntilToldOver(absl::Now()));
}

TEST(RunState, PauseAtNextStepIsOnePastTheHighestStartedStep) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  state.Heartbeat(Beat(0, 5)).IgnoreError();
  state.Heartbeat(Beat(1, 7)).IgnoreError();
  // Worker 1 may be computing step 7: it holds before step 8.
  EXPECT_EQ(state.PauseAtNextStep(), 8);
  EXPECT_EQ(state.Heartbeat(Beat(0, 6))->pause_at_step(), 8);
}

TEST(RunState, RecoveredCountsEveryWorkerAtTheRestoredStep) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  state.Recovered(40, 1);
  EXPECT_EQ(state.start_step(), 40);
  EXPECT_EQ(state.WaitForStep(40, absl::Now()), 40);
  GetTrainingStateRequest request;
  request.mutable_header()->set_run_id("run-1");
  *request.mutable_header()->mutable_sender() = MakeTask(JOB_PS, 0);
  absl::StatusOr<TrainingState> training = state.GetTrainingState(request);
  ASSERT_TRUE(training.ok());
  EXPECT_EQ(training->start_step(), 40);
  EXPECT_EQ(training->step(), 40);
}

TEST(RunState, RequestsOfUnregisteredTasksAreNotFound) {
  RunState state = TwoWorkerRun(100);
  EXPECT_EQ(state.Heartbeat(Beat(0, 1)).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(Join(state, MakeTask(JOB_WORKER, 0)).ok());
  EXPECT_TRUE(state.Heartbeat(Beat(0, 1)).ok());
}

TEST(RunState, SilentTasksAreFoundDeadOnceAndAliveWhenHeardFrom) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  absl::SleepFor(absl::Milliseconds(30));
  state.Heartbeat(Beat(0, 1)).IgnoreError();
  std::vector<std::string> dead;
  for (const TaskRef& task : state.FindDeadTasks(absl::Milliseconds(20))) {
    dead.push_back(TaskName(task));
  }
  EXPECT_EQ(dead, (std::vector<std::string>{"ps:0", "worker:1"}));
  EXPECT_TRUE(state.FindDeadTasks(absl::Milliseconds(20)).empty());
  EXPECT_EQ(state.WaitForLivePs(absl::Milliseconds(20), absl::Now()),
            std::vector<std::string>{"ps:0"});
  ASSERT_TRUE(Join(state, MakeTask(JOB_PS, 0)).ok());
  EXPECT_TRUE(state.WaitForLivePs(absl::Seconds(5), absl::Now()).empty());
}

TEST(RunState, ARestartedPsIsReportedOnceUntilRecovered) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  state.SetPhase(PHASE_TRAINING);
  ASSERT_TRUE(Join(state, MakeTask(JOB_PS, 0), /*incarnation=*/1).ok());
  EXPECT_TRUE(state.TakeRestartedPs().empty());
  ASSERT_TRUE(Join(state, MakeTask(JOB_PS, 0), /*incarnation=*/2).ok());
  ASSERT_TRUE(Join(state, MakeTask(JOB_PS, 0), /*incarnation=*/3).ok());
  EXPECT_EQ(state.TakeRestartedPs(), std::vector<int>{0});
  EXPECT_TRUE(state.TakeRestartedPs().empty());
  ASSERT_TRUE(Join(state, MakeTask(JOB_PS, 0), /*incarnation=*/4).ok());
  state.Recovered(30, 1);
  EXPECT_TRUE(state.TakeRestartedPs().empty());
}

TEST(RunState, ARecoveryRewindsWorkersAndIgnoresStaleSteps) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  state.Heartbeat(Beat(0, 50)).IgnoreError();
  state.Heartbeat(Beat(1, 52)).IgnoreError();
  state.Recovered(40, 1);
  // A beat of generation 0 no longer moves the step.
  absl::StatusOr<HeartbeatResponse> stale = state.Heartbeat(Beat(0, 53));
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->generation(), 1);
  EXPECT_EQ(stale->resume_step(), 40);
  EXPECT_EQ(state.WaitForStep(41, absl::Now()), 40);
  HeartbeatRequest current = Beat(0, 41);
  current.mutable_header()->set_generation(1);
  state.Heartbeat(current).IgnoreError();
  current = Beat(1, 42);
  current.mutable_header()->set_generation(1);
  state.Heartbeat(current).IgnoreError();
  EXPECT_EQ(state.WaitForStep(41, absl::Now()), 41);
}

TEST(RunState, ARestartedWorkerGoesOnFromTheStepItReached) {
  RunState state = TwoWorkerRun(100);
  JoinAll(state);
  state.SetPhase(PHASE_TRAINING);
  state.Heartbeat(Beat(1, 17)).IgnoreError();
  absl::StatusOr<RegisterResponse> again =
      Join(state, MakeTask(JOB_WORKER, 1), /*incarnation=*/9);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state().start_step(), 17);
  EXPECT_FALSE(again->state().restore_pending());
}

GetTrainingStateRequest AskState(int worker) {
  GetTrainingStateRequest request;
  request.mutable_header()->set_run_id("run-1");
  *request.mutable_header()->mutable_sender() = MakeTask(JOB_WORKER, worker);
  return request;
}

TEST(RunState, ARestartedCollectiveWorkerWaitsForTheNextRecovery) {
  RunState state = TwoWorkerRun(100, /*collective=*/true);
  JoinAll(state);
  state.SetPhase(PHASE_TRAINING);
  state.Heartbeat(Beat(1, 41)).IgnoreError();
  absl::StatusOr<RegisterResponse> again =
      Join(state, MakeTask(JOB_WORKER, 1), /*incarnation=*/9);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->state().restore_pending());
  // Still pending after the driver took the restart, until it recovered.
  EXPECT_EQ(state.TakeRestartedWorkers(), std::vector<int>{1});
  absl::StatusOr<TrainingState> asked = state.GetTrainingState(AskState(1));
  ASSERT_TRUE(asked.ok());
  EXPECT_TRUE(asked->restore_pending());
  EXPECT_FALSE(state.GetTrainingState(AskState(0))->restore_pending());
  state.Recovered(40, 1);
  asked = state.GetTrainingState(AskState(1));
  ASSERT_TRUE(asked.ok());
  EXPECT_FALSE(asked->restore_pending());
  EXPECT_EQ(asked->start_step(), 40);
  EXPECT_EQ(asked->generation(), 1);
}

// A worker's Register carrying its all-reduce choice.
absl::StatusOr<RegisterResponse> JoinWith(RunState& state, int worker,
                                          const std::string& backend,
                                          const std::string& dtype) {
  RegisterRequest request;
  *request.mutable_header()->mutable_sender() = MakeTask(JOB_WORKER, worker);
  request.set_incarnation(1);
  request.set_allreduce_backend(backend);
  request.set_allreduce_dtype(dtype);
  return state.Register(request);
}

TEST(RunState, RefusesAWorkerWhoseAllReduceDiffersFromTheFirstOnes) {
  RunState state = TwoWorkerRun(100, /*collective=*/true);
  // A worker that has not chosen yet (its first Register) is not checked.
  ASSERT_TRUE(JoinWith(state, 1, "", "").ok());
  ASSERT_TRUE(JoinWith(state, 0, "ring", "float32").ok());
  absl::StatusOr<RegisterResponse> refused =
      JoinWith(state, 1, "nccl", "float32");
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "worker:1 all-reduces with "
                                "--allreduce_backend=nccl in float32, but "
                                "worker:0, registered first, with ring in "
                                "float32"))
      << refused.status();
  refused = JoinWith(state, 1, "ring", "bf16");
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "bf16"));
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "ring in float32"));
  // The same choice is taken, and so is the first worker registering again.
  EXPECT_TRUE(JoinWith(state, 1, "ring", "float32").ok());
  EXPECT_TRUE(JoinWith(state, 0, "ring", "float32").ok());
  // The first one to give a choice sets it, whichever worker it is.
  RunState other = TwoWorkerRun(100, /*collective=*/true);
  ASSERT_TRUE(JoinWith(other, 1, "nccl", "bf16").ok());
  refused = JoinWith(other, 0, "ring", "bf16");
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "but worker:1, registered first, with nccl"))
      << refused.status();
}

ReportMetricsRequest Report(int worker, int64_t step, int64_t num_steps,
                            double loss, double accuracy) {
  ReportMetricsRequest request;
  request.mutable_header()->set_run_id("run-1");
  *request.mutable_header()->mutable_sender() = MakeTask(JOB_WORKER, worker);
  request.set_step(step);
  request.set_num_steps(num_steps);
  request.set_loss(loss);
  request.set_accuracy(accuracy);
  request.set_examples_per_sec(100);
  return request;
}

TEST(RunState, EpochProgressCountsEachReportInTheEpochOfItsStep) {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"],
          "worker": ["h:3", "h:4"]}, "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(tf.ok()) << tf.status();
  TrainingConfig config;
  config.set_batch_size_per_worker(8);
  RunState state("run-1", config, Placement(), tf->cluster,
                 /*steps_per_epoch=*/10, /*total_steps=*/100);
  JoinAll(state);
  ASSERT_TRUE(state.ReportMetrics(Report(0, 4, 4, 1.0, 0.25)).ok());
  ASSERT_TRUE(state.ReportMetrics(Report(0, 10, 6, 2.0, 0.5)).ok());
  ASSERT_TRUE(state.ReportMetrics(Report(1, 10, 10, 3.0, 1.0)).ok());
  ASSERT_TRUE(state.ReportMetrics(Report(1, 12, 2, 9.0, 0.0)).ok());
  // Every worker reported step 10: no waiting.
  const Progress first = state.TakeEpochProgress(0, absl::InfiniteFuture());
  const double batch = 8;
  EXPECT_EQ(first.examples, static_cast<int64_t>(20 * batch));
  EXPECT_DOUBLE_EQ(first.loss_sum, (4 * 1.0 + 6 * 2.0 + 10 * 3.0) * batch);
  EXPECT_DOUBLE_EQ(first.correct, (4 * 0.25 + 6 * 0.5 + 10 * 1.0) * batch);
  // Step 12 is in epoch 1, which worker 0 has not finished: its sums so far
  // at the deadline.
  const Progress second = state.TakeEpochProgress(1, absl::Now());
  EXPECT_EQ(second.examples, static_cast<int64_t>(2 * batch));
  EXPECT_DOUBLE_EQ(second.loss_sum, 2 * 9.0 * batch);
  // Taken: gone.
  EXPECT_EQ(state.TakeEpochProgress(0, absl::Now()).examples, 0);
}

TEST(RunState, ProgressWeighsTheWorkersTrainingAucsByTheirExamples) {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"],
          "worker": ["h:3", "h:4"]}, "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(tf.ok()) << tf.status();
  TrainingConfig config;
  config.set_batch_size_per_worker(8);
  RunState state("run-1", config, Placement(), tf->cluster,
                 /*steps_per_epoch=*/10, /*total_steps=*/100);
  JoinAll(state);
  ReportMetricsRequest first = Report(0, 4, 4, 1.0, 0.5);
  first.set_auc(0.75);
  ReportMetricsRequest second = Report(1, 2, 2, 1.0, 0.5);
  second.set_auc(0.6);
  ASSERT_TRUE(state.ReportMetrics(first).ok());
  ASSERT_TRUE(state.ReportMetrics(second).ok());
  // Without an AUC (not binary cross-entropy): not counted in it.
  ASSERT_TRUE(state.ReportMetrics(Report(1, 4, 2, 1.0, 0.5)).ok());
  const Progress progress = state.TakeProgress();
  EXPECT_EQ(progress.auc_examples, 6 * 8);
  EXPECT_DOUBLE_EQ(progress.auc_sum / progress.auc_examples,
                   (4 * 0.75 + 2 * 0.6) / 6);
}

TEST(RunState, AModelParallelGroupsExamplesCountOnce) {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"],
          "worker": ["h:3", "h:4"]}, "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(tf.ok()) << tf.status();
  TrainingConfig config;
  config.set_batch_size_per_worker(8);
  config.set_mesh("data:1,model:2");
  config.mutable_update()->set_num_workers(2);
  RunState state("run-1", config, Placement(), tf->cluster,
                 /*steps_per_epoch=*/10, /*total_steps=*/100);
  JoinAll(state);
  // Both members of the one group trained the same 4 batches of 8, at 100
  // examples/s each.
  ASSERT_TRUE(state.ReportMetrics(Report(0, 4, 4, 1.0, 0.5)).ok());
  ASSERT_TRUE(state.ReportMetrics(Report(1, 4, 4, 1.0, 0.5)).ok());
  const Progress progress = state.TakeProgress();
  EXPECT_EQ(progress.examples, 4 * 8);
  EXPECT_DOUBLE_EQ(progress.loss_sum / progress.examples, 1.0);
  // The group's 32 examples in its 0.32 busy seconds: 100 examples/s.
  EXPECT_DOUBLE_EQ(progress.busy_seconds, 0.32);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
