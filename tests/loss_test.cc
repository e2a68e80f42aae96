// The chief's --loss and --from_logits, with real processes: bad values are
// refused with one line and exit status 2 before anything starts; seed 000's
// MLP trains with loss="mse" as it is compiled; a binary model (one sigmoid
// unit) gets binary cross-entropy by default, and its evaluation, by the
// chief or by an evaluator task, reports the exact AUC in the log and
// summary.json.
#include <sys/stat.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

// A tf.keras 2 Sequential model on 2 features: Dense(8, relu), then
// Dense(units, activation) named "out".
std::string ModelJson(int units, const std::string& activation) {
  return absl::StrCat(
      R"({"class_name": "Sequential", "config": {"name": "m", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in",
        "batch_input_shape": [null, 2]}},
      {"class_name": "Dense", "config": {"name": "hidden", "units": 8,
        "activation": "relu"}},
      {"class_name": "Dense", "config": {"name": "out", "units": )",
      units, R"(, "activation": ")", activation, R"("}}]}})");
}

// `n` lines "x0,x1,label", label 1 when x0 + x1 / 2 > 0 (or `label` for
// every line when it is >= 0).
std::string Csv(int n, uint32_t seed, int label = -1) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> x(-1, 1);
  std::string csv;
  for (int i = 0; i < n; ++i) {
    const float x0 = x(random), x1 = x(random);
    absl::StrAppend(&csv, x0, ",", x1, ",",
                    label >= 0 ? label : (x0 + x1 / 2 > 0 ? 1 : 0), "\n");
  }
  return csv;
}

// A data dir of train.csv and test.csv; `bad_label` >= 0 is the label of
// the training set's example 3.
std::string WriteData(const std::string& name, int bad_label = -1) {
  const std::string dir = TempPath(name + "-data");
  mkdir(dir.c_str(), 0755);
  std::string train = Csv(3, 1);
  absl::StrAppend(&train, bad_label >= 0 ? Csv(1, 2, bad_label) : Csv(1, 2),
                  Csv(508, 3));
  EXPECT_TRUE(WriteFile(dir + "/train.csv", train));
  EXPECT_TRUE(WriteFile(dir + "/test.csv", Csv(300, 4)));
  return dir;
}

std::string WriteModel(const std::string& name, int units,
                       const std::string& activation) {
  const std::string path = TempPath(name + ".json");
  EXPECT_TRUE(WriteFile(path, ModelJson(units, activation)));
  return path;
}

TEST(Loss, ChiefRefusesBadLossFlagsBeforeStartingAnything) {
  const LocalCluster cluster(1, 1);
  const std::string model_dir = TempPath("loss-flags-model");
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::string linear = WriteModel("loss-linear", 3, "linear");
  const std::string sigmoid = WriteModel("loss-sigmoid", 1, "sigmoid");
  const Case cases[] = {
      {{"--loss=hinge"},
       "--loss: \"hinge\" is not sparse_categorical_crossentropy, "
       "categorical_crossentropy, binary_crossentropy, mse, mae or huber"},
      {{"--loss=huber", "--from_logits"},
       "--from_logits: applies to the cross-entropy losses only, not to "
       "--loss=huber"},
      {{"--model=" + linear},
       "--loss: not given, and the model's output layer 'out' (linear, 3 "
       "units) is neither a softmax nor a single sigmoid unit, so the loss "
       "cannot be told from it: pass --loss (sparse_categorical_crossentropy, "
       "categorical_crossentropy, binary_crossentropy, mse, mae or huber) and "
       "--from_logits as the model was compiled"},
      {{"--model=mlp", "--loss=binary_crossentropy"},
       "--loss=binary_crossentropy: the model's output has 10 units; binary "
       "cross-entropy takes one output unit per example and labels 0 or 1 "
       "(for one unit per class: --loss=sparse_categorical_crossentropy)"},
      {{"--model=" + sigmoid, "--data_dir=" + WriteData("loss-labels", 2)},
       "--loss=binary_crossentropy: label 2 of example 3 of the training data "
       "is not 0 or 1 (binary cross-entropy takes labels 0 and 1)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags[0]);
    std::vector<std::string> flags = c.flags;
    flags.push_back("--model_dir=" + model_dir);
    Subprocess chief = cluster.Start("loss-flags", "chief", 0, flags);
    EXPECT_EQ(chief.Wait(60), 2);
    EXPECT_EQ(Log(chief), c.message + "\n");
  }
  struct stat st;
  EXPECT_NE(stat(model_dir.c_str(), &st), 0) << "nothing may be written";
}

TEST(Loss, SeedZeroMlpTrainsWithMseAsCompiled) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 1);
  const std::string model_dir = TempPath("loss-mse-model");
  const std::string log =
      cluster.Run("loss-mse",
                  {"--model=examples/seed000_mlp.keras3.json", "--loss=mse",
                   "--steps=60", "--batch_size=100", "--threads=1",
                   "--print_every_steps=30", "--model_dir=" + model_dir},
                  {"--threads=1"});
  EXPECT_NE(log.find("chief: loss mse against the one-hot rows of the label; "
                     "metrics: accuracy"),
            std::string::npos)
      << log;
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  // 6,000 examples of Fashion-MNIST: far above chance (0.1).
  EXPECT_GT(summary["test_accuracy"].get<double>(), 0.6) << summary;
  EXPECT_FALSE(summary.contains("test_auc"));
}

// The default loss of one sigmoid unit, and the AUC of the chief's own
// evaluation (at each epoch's end) or of an evaluator task.
TEST(Loss, BinaryModelReportsTheExactAuc) {
  const std::string data_dir = WriteData("loss-binary");
  const std::string model = WriteModel("loss-binary", 1, "sigmoid");
  for (const bool evaluator_task : {false, true}) {
    SCOPED_TRACE(evaluator_task ? "evaluator task" : "chief");
    const std::string name =
        evaluator_task ? "loss-binary-evaluator" : "loss-binary-chief";
    const std::string model_dir = TempPath(name + "-model");
    // 512 examples / (1 worker x 64) = 8 steps an epoch.
    const std::vector<std::string> chief_flags = {
        "--model=" + model,      "--data_dir=" + data_dir,  "--epochs=2",
        "--batch_size=64",       "--learning_rate=0.05",    "--threads=1",
        "--print_every_steps=8", "--model_dir=" + model_dir};
    LocalCluster cluster(1, 1);
    std::string log;
    if (evaluator_task) {
      cluster.AddEvaluator();
      Subprocess evaluator =
          cluster.Start(name, "evaluator", 0,
                        {"--model_dir=" + model_dir, "--data_dir=" + data_dir,
                         "--threads=1"});
      log = cluster.Run(name, chief_flags,
                        {"--data_dir=" + data_dir, "--threads=1"});
      EXPECT_EQ(evaluator.Wait(60), 0) << Log(evaluator);
      EXPECT_NE(Log(evaluator).find("ckpt-16 (step 16): test_loss "),
                std::string::npos)
          << Log(evaluator);
    } else {
      log = cluster.Run(name, chief_flags,
                        {"--data_dir=" + data_dir, "--threads=1"});
    }
    EXPECT_NE(log.find("chief: loss binary_crossentropy (from_logits=false: "
                       "computed from the logits behind the final sigmoid, "
                       "exactly, as tf.keras does); metrics: binary accuracy "
                       "(probability > 0.5) and AUC (exact, over the whole "
                       "test set) (the model's default; --loss to change it)"),
              std::string::npos)
        << log;
    const nlohmann::json summary = nlohmann::json::parse(
        ReadFile(model_dir + "/summary.json"), nullptr, false);
    ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
    ASSERT_TRUE(summary.contains("test_auc")) << summary;
    const double auc = summary["test_auc"].get<double>();
    EXPECT_GT(auc, 0.9) << summary;
    EXPECT_LE(auc, 1.0) << summary;
    EXPECT_GT(summary["test_accuracy"].get<double>(), 0.8) << summary;
    // The last evaluation's line carries the AUC the summary holds.
    const std::string line =
        absl::StrFormat("test_loss %.4f  test_acc %.4f  test_auc %.4f",
                        summary["test_loss"].get<double>(),
                        summary["test_accuracy"].get<double>(), auc);
    // The chief's own evaluation adds the log loss and calibration.
    const std::string ctr =
        evaluator_task
            ? ""
            : absl::StrFormat("  test_logloss %.4f  test_calibration %.3f",
                              summary["test_logloss"].get<double>(),
                              summary["test_calibration"].get<double>());
    EXPECT_NE(log.find(evaluator_task ? "evaluator: step 16 (epoch 2): " + line
                                      : "  " + line + ctr + "\n"),
              std::string::npos)
        << line << "\n"
        << log;
    EXPECT_NE(log.find(absl::StrFormat("test AUC %.4f", auc)),
              std::string::npos)
        << log;
  }
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
