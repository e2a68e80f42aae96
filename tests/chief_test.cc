// The chief's RPCs refuse bad requests through real gRPC, naming the
// problem, and the run's state does not change: another run's id, a task
// that is not in TF_CONFIG, a task that never registered, impossible
// metrics, a ps saying it finished training. And SIGTERM ends a chief
// promptly whatever it waits for.
#include <signal.h>

#include <memory>
#include <optional>
#include <string>

#include "chief/chief_client.h"
#include "common/cluster_spec.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "common/tf_config.h"
#include "gtest/gtest.h"
#include "proto/chief_service.grpc.pb.h"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

class ChiefTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
    chief_.emplace(cluster_.Start("chief-test", "chief", 0,
                                  {"--model=mlp", "--steps=5",
                                   "--model_dir=" + TempPath("chief-test"),
                                   "--wait_for_tasks_seconds=60"}));
    absl::StatusOr<TfConfig> config =
        ParseTfConfig(cluster_.TfConfig("chief", 0));
    ASSERT_TRUE(config.ok()) << config.status();
    address_ = config->cluster.Address(MakeTask(JOB_CHIEF, 0))->ToString();
    cluster_text_ = config->cluster.ToString();
    stub_ = Chief::NewStub(CreatePstrainChannel(address_));
  }

  void TearDown() override {
    if (chief_) chief_->Stop(SIGKILL);
  }

  std::unique_ptr<chief::ChiefClient> Client(JobType job, int index) {
    return std::make_unique<chief::ChiefClient>(
        CreatePstrainChannel(address_), MakeTask(job, index), cluster_text_);
  }

  // A raw Heartbeat as `job`:`index` with `run_id`.
  absl::Status RawHeartbeat(const std::string& run_id, JobType job, int index) {
    HeartbeatRequest request;
    request.mutable_header()->set_run_id(run_id);
    *request.mutable_header()->mutable_sender() = MakeTask(job, index);
    request.set_step(3);
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    HeartbeatResponse response;
    return FromGrpcStatus(stub_->Heartbeat(&context, request, &response));
  }

  LocalCluster cluster_{1, 1};
  std::optional<Subprocess> chief_;
  std::string address_;
  std::string cluster_text_;
  std::unique_ptr<Chief::Stub> stub_;
};

TEST_F(ChiefTest, RefusesBadRequestsAndChangesNothing) {
  std::unique_ptr<chief::ChiefClient> worker = Client(JOB_WORKER, 0);
  absl::StatusOr<RegisterResponse> joined = worker->Register(absl::Seconds(30));
  ASSERT_TRUE(joined.ok()) << joined.status();
  const std::string run_id = joined->run_id();

  // A task that is not in the cluster.
  absl::StatusOr<RegisterResponse> stranger =
      Client(JOB_WORKER, 7)->Register(absl::Seconds(5));
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(stranger.status().message(),
                       "task worker:7 is not a ps, worker or evaluator of this cluster"))
      << stranger.status();

  // Another run's id.
  absl::Status other = RawHeartbeat("run-of-someone-else", JOB_WORKER, 0);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(other.message(), "run id 'run-of-someone-else' is not "
                                        "this chief's run '" + run_id + "'"))
      << other;

  // A task of the cluster that never registered.
  absl::Status unknown = RawHeartbeat(run_id, JOB_PS, 0);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(unknown.message(), "ps:0 is not registered")) << unknown;

  // Metrics that cannot be.
  ReportMetricsRequest metrics;
  metrics.set_step(2);
  metrics.set_num_steps(0);
  metrics.set_examples_per_sec(-5);
  absl::StatusOr<ReportMetricsResponse> reported = worker->ReportMetrics(metrics);
  EXPECT_EQ(reported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(reported.status().message(),
                       "examples_per_sec -5 and num_steps 0 must be > 0"))
      << reported.status();

  // A ps cannot finish training.
  std::unique_ptr<chief::ChiefClient> ps = Client(JOB_PS, 0);
  ASSERT_TRUE(ps->Register(absl::Seconds(30)).ok());
  absl::StatusOr<TrainingFinishedResponse> finished = ps->TrainingFinished(5);
  EXPECT_EQ(finished.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(finished.status().message(),
                       "task ps:0 is not a worker of this run"))
      << finished.status();

  // None of it moved the run.
  absl::StatusOr<TrainingState> state = worker->GetTrainingState();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->run_id(), run_id);
  EXPECT_EQ(state->step(), 0);
  EXPECT_EQ(state->generation(), 0);
}

TEST_F(ChiefTest, SigtermEndsAChiefStillWaitingForItsTasks) {
  // Nothing else of the cluster runs: the chief waits for its ps and worker
  // (--wait_for_tasks_seconds=60).
  // Any answer says the chief is up (the call waits until it serves).
  const absl::Status answer = RawHeartbeat("no-such-run", JOB_WORKER, 0);
  ASSERT_NE(answer.code(), absl::StatusCode::kDeadlineExceeded) << answer;
  const int code = chief_->Stop(SIGTERM, /*timeout_seconds=*/10);
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_TRUE(Contains(ReadFile(chief_->log_path()),
                       "chief: SIGTERM: exiting"))
      << ReadFile(chief_->log_path());
  chief_.reset();
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
