// Unit tests of the evaluator task's loop against the chief's own RunState
// (in process): which checkpoints it evaluates, in which order, what it
// reports, and when it stops. The backend records the weights it is given,
// so each evaluation is traced to the checkpoint it read.
#include "chief/evaluator.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "chief/checkpoint_test_util.h"
#include "chief/local_chief_connection.h"
#include "chief/run_state.h"
#include "common/tf_config.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

using testing::FreshDir;
using testing::TinyConfig;
using testing::TinyValue;
using testing::WriteTinyCheckpoint;

constexpr int64_t kStepsPerEpoch = 10;
constexpr int64_t kSteps = 30;

// Evaluate() notes the first kernel value of the weights it is given
// (TinyValue of the checkpoint's step) with the batch's examples, and calls
// every example correct.
class RecordingBackend : public worker::Backend {
 public:
  absl::StatusOr<worker::StepResult> TrainStep(const worker::StepInput&,
                                               const worker::Weights&,
                                               worker::Gradients*) override {
    return absl::UnimplementedError("evaluation only");
  }
  absl::StatusOr<worker::StepResult> Evaluate(
      const worker::StepInput& input, const worker::Weights& weights) override {
    const float kernel = weights.at("dense/kernel")->flat<float>()[0];
    {
      absl::MutexLock lock(&mu_);
      if (seen_.empty() || seen_.back().first != kernel) {
        seen_.push_back({kernel, 0});
      }
      seen_.back().second += input.batch;
    }
    worker::StepResult result;
    result.examples = input.batch;
    result.correct = input.batch;
    result.loss_sum = 0.25 * input.batch;
    return result;
  }
  // Each run of evaluations on the same weights: their first kernel value
  // and the examples evaluated.
  std::vector<std::pair<float, int64_t>> seen() const {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::pair<float, int64_t>> seen_ ABSL_GUARDED_BY(mu_);
};

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_dir_ = FreshDir(::testing::UnitTest::GetInstance()
                              ->current_test_info()
                              ->name());
    test_.features = *Tensor::Create(DT_FLOAT, {6, 4});
    test_.labels.assign(6, 0);
    test_.num_classes = 2;
  }

  // The chief of run `run_id`, with an evaluator task.
  void StartChief(const std::string& run_id) {
    TrainingConfig config = TinyConfig();
    config.set_batch_size_per_worker(2);
    config.set_steps(kSteps);
    absl::StatusOr<TfConfig> tf = ParseTfConfig(
        R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3"],
            "evaluator": ["h:4"]}, "task": {"type": "chief", "index": 0}})");
    ASSERT_TRUE(tf.ok()) << tf.status();
    state_ = std::make_unique<RunState>(run_id, config, Placement(),
                                        tf->cluster, kStepsPerEpoch, kSteps);
    state_->SetPhase(PHASE_TRAINING);
    auto connection = std::make_unique<LocalChiefConnection>(state_.get());
    connection_ = connection.get();
    client_ = std::make_unique<ChiefClient>(std::move(connection),
                                            MakeTask(JOB_EVALUATOR, 0));
    absl::StatusOr<RegisterResponse> run = client_->Register(absl::Seconds(1));
    ASSERT_TRUE(run.ok()) << run.status();
    run_ = *run;
  }

  absl::Status RunEvaluator(absl::Duration patience = absl::Seconds(20)) {
    EvaluatorOptions options;
    options.model_dir = model_dir_;
    options.poll = absl::Milliseconds(5);
    options.chief_patience = patience;
    std::unique_ptr<CheckpointEvaluation> evaluation =
        NewTestSetCheckpointEvaluation(&backend_, &test_, /*batch=*/4,
                                       /*binary_metrics=*/false);
    Evaluator evaluator(options, &run_, client_.get(), evaluation.get());
    return evaluator.Run();
  }

  std::vector<int64_t> ReportedSteps() {
    std::vector<int64_t> steps;
    for (const RunState::EvaluationReport& report : state_->TakeEvaluations()) {
      EXPECT_DOUBLE_EQ(report.accuracy, 1.0);
      EXPECT_DOUBLE_EQ(report.loss, 0.25);
      steps.push_back(report.step);
    }
    return steps;
  }

  std::string model_dir_;
  data::Dataset test_;
  RecordingBackend backend_;
  std::unique_ptr<RunState> state_;
  LocalChiefConnection* connection_ = nullptr;
  std::unique_ptr<ChiefClient> client_;
  RegisterResponse run_;
};

TEST_F(EvaluatorTest, EvaluatesEachEpochEndCheckpointOnceOldestFirst) {
  StartChief("run-test");
  for (int64_t step : {20, 15, 10, 30}) WriteTinyCheckpoint(model_dir_, step);
  WriteTinyCheckpoint(model_dir_, 25, /*complete=*/false);
  state_->SetPhase(PHASE_FINISHED);
  ASSERT_TRUE(RunEvaluator().ok());
  EXPECT_EQ(ReportedSteps(), (std::vector<int64_t>{10, 20, 30}));
  // Each on the whole test set, with the weights of its checkpoint.
  EXPECT_EQ(backend_.seen(), (std::vector<std::pair<float, int64_t>>{
                                 {TinyValue("dense/kernel", 10, 0), 6},
                                 {TinyValue("dense/kernel", 20, 0), 6},
                                 {TinyValue("dense/kernel", 30, 0), 6}}));
}

TEST_F(EvaluatorTest, WatchesARunUntilItIsOver) {
  StartChief("run-test");
  std::thread chief([this] {
    absl::SleepFor(absl::Milliseconds(50));
    WriteTinyCheckpoint(model_dir_, 10);
    absl::SleepFor(absl::Milliseconds(50));
    WriteTinyCheckpoint(model_dir_, 20);
    state_->SetPhase(PHASE_FINISHED);
  });
  const absl::Status status = RunEvaluator();
  chief.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(ReportedSteps(), (std::vector<int64_t>{10, 20}));
}

TEST_F(EvaluatorTest, LeavesAnotherRunsCheckpointsAlone) {
  StartChief("run-other");
  WriteTinyCheckpoint(model_dir_, 10);
  state_->SetPhase(PHASE_FINISHED);
  ASSERT_TRUE(RunEvaluator().ok());
  EXPECT_TRUE(ReportedSteps().empty());
  EXPECT_TRUE(backend_.seen().empty());
}

TEST_F(EvaluatorTest, AFailedRunEndsItAborted) {
  StartChief("run-test");
  state_->SetPhase(PHASE_FAILED);
  EXPECT_TRUE(absl::IsAborted(RunEvaluator()));
}

TEST_F(EvaluatorTest, AChiefSilentPastItsPatienceEndsIt) {
  StartChief("run-test");
  connection_->FailNext(1 << 20, absl::UnavailableError("chief down"));
  const absl::Status status = RunEvaluator(absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("chief down"), std::string::npos) << status;
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
