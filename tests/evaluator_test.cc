// A run whose TF_CONFIG has an evaluator task: the chief writes a
// checkpoint at each epoch's end, the evaluator (the chief binary with task
// type "evaluator") evaluates each on the test set and reports it, and the
// chief prints the reports and puts the last in summary.json.
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

TEST(Evaluator, EvaluatesEachEpochsCheckpointForTheChief) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  LocalCluster cluster(1, 2);
  cluster.AddEvaluator();
  const std::string model_dir = TempPath("eval-model");
  std::vector<Subprocess> tasks;
  tasks.push_back(cluster.Start("eval", "ps", 0));
  for (int i = 0; i < 2; ++i) {
    tasks.push_back(cluster.Start("eval", "worker", i, {"--threads=1"}));
  }
  Subprocess evaluator = cluster.Start(
      "eval", "evaluator", 0, {"--model_dir=" + model_dir, "--threads=1"});
  // 60,000 examples / (2 workers x 250) = 120 steps an epoch.
  Subprocess chief = cluster.Start(
      "eval", "chief", 0,
      {"--model=mlp", "--epochs=2", "--batch_size=250", "--threads=1",
       "--print_every_steps=60", "--model_dir=" + model_dir});
  ASSERT_EQ(chief.Wait(300), 0) << Log(chief);
  EXPECT_EQ(evaluator.Wait(60), 0) << Log(evaluator);
  for (Subprocess& task : tasks) EXPECT_EQ(task.Wait(60), 0) << Log(task);

  const std::string log = Log(chief);
  EXPECT_NE(log.find("(the evaluator evaluates the checkpoint)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("evaluator: step 120 (epoch 1): test_loss "),
            std::string::npos)
      << log;
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  const double accuracy = summary["test_accuracy"].get<double>();
  EXPECT_GT(accuracy, 0.7);
  // The summary's accuracy is the evaluator's of the final checkpoint.
  EXPECT_NE(log.find(absl::StrFormat("evaluator: step 240 (epoch 2): "
                                     "test_loss %.4f  test_acc %.4f",
                                     summary["test_loss"].get<double>(),
                                     accuracy)),
            std::string::npos)
      << log;
  EXPECT_NE(Log(evaluator).find("ckpt-240 (step 240): test_loss"),
            std::string::npos)
      << Log(evaluator);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
