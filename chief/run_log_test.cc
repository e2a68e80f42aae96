#include "chief/run_log.h"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "chief/event_test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

using testing::ListDir;
using testing::ReadEvents;
using testing::Scalars;
using testing::Slurp;

std::vector<tensorboard::Event> EventsIn(const std::string& dir) {
  const std::vector<std::string> names = ListDir(dir);
  EXPECT_EQ(names.size(), 1u) << dir;
  return names.empty() ? std::vector<tensorboard::Event>{}
                       : ReadEvents(dir + "/" + names[0]);
}

Progress MakeProgress(int64_t examples, double mean_loss, double accuracy) {
  Progress p;
  p.examples = examples;
  p.loss_sum = mean_loss * examples;
  p.correct = accuracy * examples;
  return p;
}

std::unique_ptr<RunLog> NewRunLog(const std::string& model_dir) {
  absl::StatusOr<std::unique_ptr<RunLog>> log =
      RunLog::Create({model_dir, /*learning_rate=*/0.001, "| model |",
                      /*keep_history_before=*/0});
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? std::move(*log) : nullptr;
}

TEST(RunLog, EpochFiguresAndProgressLinesGoToEventsAndHistory) {
  const std::string model_dir = std::string(getenv("TEST_TMPDIR")) + "/epochs";
  std::unique_ptr<RunLog> log = NewRunLog(model_dir);
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->LogProgress(10, MakeProgress(100, 1.0, 0.5), 2.0).ok());
  ASSERT_TRUE(log->LogProgress(20, MakeProgress(300, 0.5, 0.75), 2.0).ok());
  // The epoch's reports (RunState::TakeEpochProgress), not the lines', give
  // its means.
  ASSERT_TRUE(log->EndEpoch(0, MakeProgress(400, 0.625, 0.6875)).ok());
  ASSERT_TRUE(log->LogProgress(30, MakeProgress(200, 0.25, 1.0), 1.0).ok());
  ASSERT_TRUE(log->EndEpoch(1, MakeProgress(200, 0.25, 1.0)).ok());

  // Epoch 0: 400 examples in the 4 seconds of its two lines.
  EXPECT_EQ(log->history().Get(0, "loss"), 0.625);
  EXPECT_EQ(log->history().Get(0, "accuracy"), 0.6875);
  EXPECT_EQ(log->history().Get(0, "examples_per_sec"), 100.0);
  EXPECT_EQ(log->history().Get(0, "seconds"), 4.0);
  // Epoch 1 starts afresh.
  EXPECT_EQ(log->history().Get(1, "loss"), 0.25);
  EXPECT_EQ(log->history().Get(1, "examples_per_sec"), 200.0);

  const std::vector<tensorboard::Event> train = EventsIn(model_dir + "/train");
  using Points = std::vector<std::pair<int64_t, float>>;
  EXPECT_EQ(Scalars(train, "batch_loss"),
            (Points{{10, 1.0f}, {20, 0.5f}, {30, 0.25f}}));
  EXPECT_EQ(Scalars(train, "batch_accuracy"),
            (Points{{10, 0.5f}, {20, 0.75f}, {30, 1.0f}}));
  EXPECT_EQ(Scalars(train, "batch_examples_per_second"),
            (Points{{10, 50.0f}, {20, 150.0f}, {30, 200.0f}}));
  EXPECT_EQ(Scalars(train, "epoch_loss"), (Points{{0, 0.625f}, {1, 0.25f}}));
  EXPECT_EQ(Scalars(train, "epoch_accuracy"),
            (Points{{0, 0.6875f}, {1, 1.0f}}));
  EXPECT_EQ(Scalars(train, "epoch_learning_rate"),
            (Points{{0, 0.001f}, {1, 0.001f}}));
  // The model summary, as text at step 0.
  ASSERT_GE(train.size(), 2u);
  EXPECT_EQ(train[1].summary().value(0).tag(), "model_summary");
  EXPECT_EQ(train[1].summary().value(0).tensor().string_val(0), "| model |");

  EXPECT_EQ(Slurp(model_dir + "/history.csv"),
            "epoch,accuracy,examples_per_sec,loss,seconds\n"
            "0,0.6875,100,0.625,4\n"
            "1,1,200,0.25,1\n");
}

TEST(RunLog, EvaluationGoesToValidationAndFillsTheEpochsRow) {
  const std::string model_dir = std::string(getenv("TEST_TMPDIR")) + "/eval";
  std::unique_ptr<RunLog> log = NewRunLog(model_dir);
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->LogProgress(50, MakeProgress(64, 0.5, 0.5), 1.0).ok());
  ASSERT_TRUE(log->EndEpoch(0, MakeProgress(64, 0.5, 0.5)).ok());
  // Before the evaluation comes (an evaluator task's may come later).
  EXPECT_EQ(Slurp(model_dir + "/history.csv"),
            "epoch,accuracy,examples_per_sec,loss,seconds\n"
            "0,0.5,64,0.5,1\n");
  ASSERT_TRUE(log->LogEvaluation(0, 50, {0.375, 0.875, 0.9375}).ok());
  EXPECT_EQ(Slurp(model_dir + "/history.csv"),
            "epoch,accuracy,examples_per_sec,loss,seconds,val_accuracy,"
            "val_auc,val_loss\n"
            "0,0.5,64,0.5,1,0.875,0.9375,0.375\n");

  const std::vector<tensorboard::Event> validation =
      EventsIn(model_dir + "/validation");
  using Points = std::vector<std::pair<int64_t, float>>;
  EXPECT_EQ(Scalars(validation, "epoch_loss"), (Points{{0, 0.375f}}));
  EXPECT_EQ(Scalars(validation, "epoch_accuracy"), (Points{{0, 0.875f}}));
  EXPECT_EQ(Scalars(validation, "epoch_auc"), (Points{{0, 0.9375f}}));
  EXPECT_EQ(Scalars(validation, "evaluation_loss_vs_iterations"),
            (Points{{50, 0.375f}}));
  // Training values stay in train/.
  EXPECT_TRUE(Scalars(validation, "batch_loss").empty());
}

TEST(RunLog, CtrMetricsGoToHistoryAndValidation) {
  const std::string model_dir = std::string(getenv("TEST_TMPDIR")) + "/ctr";
  std::unique_ptr<RunLog> log = NewRunLog(model_dir);
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->LogProgress(50, MakeProgress(64, 0.5, 0.5), 1.0).ok());
  ASSERT_TRUE(log->EndEpoch(0, MakeProgress(64, 0.5, 0.5)).ok());
  Evaluation eval{0.375, 0.875, 0.75};
  eval.log_loss = 0.5;
  eval.calibration = 1.25;
  ASSERT_TRUE(log->LogEvaluation(0, 50, eval).ok());
  EXPECT_EQ(Slurp(model_dir + "/history.csv"),
            "epoch,accuracy,examples_per_sec,loss,seconds,val_accuracy,"
            "val_auc,val_calibration,val_logloss,val_loss\n"
            "0,0.5,64,0.5,1,0.875,0.75,1.25,0.5,0.375\n");
  const std::vector<tensorboard::Event> validation =
      EventsIn(model_dir + "/validation");
  using Points = std::vector<std::pair<int64_t, float>>;
  EXPECT_EQ(Scalars(validation, "epoch_logloss"), (Points{{0, 0.5f}}));
  EXPECT_EQ(Scalars(validation, "epoch_calibration"), (Points{{0, 1.25f}}));
}

TEST(RunLog, ResumedRunKeepsTheFinishedEpochsOfHistoryCsv) {
  const std::string model_dir = std::string(getenv("TEST_TMPDIR")) + "/resume";
  {
    std::unique_ptr<RunLog> first = NewRunLog(model_dir);
    ASSERT_NE(first, nullptr);
    for (int epoch = 0; epoch < 3; ++epoch) {
      ASSERT_TRUE(
          first->LogProgress(10 * (epoch + 1), MakeProgress(8, 0.5, 0.5), 1)
              .ok());
      ASSERT_TRUE(first->EndEpoch(epoch, MakeProgress(8, 0.5, 0.5)).ok());
    }
  }
  // The checkpoint it resumes from finished epochs 0 and 1: epoch 2 is
  // trained again.
  RunLogOptions options;
  options.model_dir = model_dir;
  options.keep_history_before = 2;
  absl::StatusOr<std::unique_ptr<RunLog>> second = RunLog::Create(options);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->history().Get(1, "loss"), 0.5);
  EXPECT_EQ((*second)->history().Get(2, "loss"), std::nullopt);
  ASSERT_TRUE((*second)->LogProgress(30, MakeProgress(8, 0.25, 1), 1).ok());
  ASSERT_TRUE((*second)->EndEpoch(2, MakeProgress(8, 0.25, 1)).ok());
  EXPECT_EQ(Slurp(model_dir + "/history.csv"),
            "epoch,accuracy,examples_per_sec,loss,seconds\n"
            "0,0.5,8,0.5,1\n"
            "1,0.5,8,0.5,1\n"
            "2,1,8,0.25,1\n");
  // Each chief has its own event files.
  EXPECT_EQ(ListDir(model_dir + "/train").size(), 2u);
}

TEST(RunLog, HistoryCsvThatDoesNotReadBackIsAnErrorNamingIt) {
  const std::string model_dir = std::string(getenv("TEST_TMPDIR")) + "/badcsv";
  ASSERT_NE(NewRunLog(model_dir), nullptr);
  std::ofstream(model_dir + "/history.csv") << "epoch,loss\n0,zero\n";
  RunLogOptions options;
  options.model_dir = model_dir;
  options.keep_history_before = 1;
  absl::StatusOr<std::unique_ptr<RunLog>> log = RunLog::Create(options);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(log.status().message().find(model_dir + "/history.csv: line 2"),
            std::string::npos)
      << log.status();
}

TEST(RunLog, ModelDirThatIsAFileIsAnError) {
  const std::string file = std::string(getenv("TEST_TMPDIR")) + "/not_a_dir";
  std::ofstream(file) << "x";
  RunLogOptions options;
  options.model_dir = file;
  absl::StatusOr<std::unique_ptr<RunLog>> log = RunLog::Create(options);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find(file), std::string::npos);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
