// A collective run (no ps) evaluates as a ps run does: worker 0 writes a
// checkpoint at each epoch's end, the chief evaluates it on the test set
// and prints and logs the epoch's test figures; and the chief writes the
// checkpoint of step 0 (the replicas' initial values), which a run
// resumes from exactly as from its seed (here a ps run, which restores it).
// Real processes on 127.0.0.1.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

using Variables = std::map<std::string, std::vector<float>>;

TEST(CollectiveEvaluation, ChiefEvaluatesEachEpochsCheckpoint) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string model_dir = TempPath("coll-eval-model");
  // 60,000 examples / (2 workers x 250) = 120 steps an epoch.
  const std::string log = LocalCluster(0, 2).Run(
      "coll-eval",
      {"--model=mlp", "--epochs=2", "--batch_size=250", "--threads=1",
       "--print_every_steps=60", "--model_dir=" + model_dir},
      {"--threads=1"});
  std::vector<double> accuracies;
  std::vector<double> losses;
  const std::regex line(
      R"(epoch (\d)/2  step (\d+)/240 .* test_loss ([0-9.]+)  test_acc ([0-9.]+))");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end;
       ++it) {
    const int epoch = std::stoi((*it)[1]);
    EXPECT_EQ(std::stoi((*it)[2]), epoch * 120) << it->str();
    losses.push_back(std::stod((*it)[3]));
    accuracies.push_back(std::stod((*it)[4]));
  }
  ASSERT_EQ(accuracies.size(), 2u) << log;
  std::printf("epoch-end test accuracy %.4f, %.4f; loss %.4f, %.4f\n",
              accuracies[0], accuracies[1], losses[0], losses[1]);
  // Trained: well above chance (0.1) after one epoch of the mlp, and the
  // second epoch's loss not worse than the first's by much.
  EXPECT_GT(accuracies[0], 0.6);
  EXPECT_LE(accuracies[1], 1.0);
  EXPECT_GT(accuracies[1], 0.6);
  EXPECT_LT(losses[1], losses[0] * 1.2);
  EXPECT_EQ(log.find("evaluated at the end"), std::string::npos) << log;
  // The epochs' checkpoints (and the one of step 0) are there.
  for (int step : {0, 120, 240}) {
    EXPECT_TRUE(std::filesystem::exists(
        absl::StrCat(model_dir, "/ckpt-", step, "/index.pb")))
        << step;
  }
  // The summary and the history carry the same figures.
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  EXPECT_EQ(absl::StrFormat("%.4f", summary["test_accuracy"].get<double>()),
            absl::StrFormat("%.4f", accuracies[1]));
  const nlohmann::json& val = summary["history"]["val_accuracy"];
  ASSERT_TRUE(val.is_array()) << summary.dump();
  ASSERT_EQ(val.size(), 2u) << summary.dump();
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(absl::StrFormat("%.4f", val[e].get<double>()),
              absl::StrFormat("%.4f", accuracies[e]));
  }
  // TensorBoard's validation events were written.
  bool events = false;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(model_dir + "/validation", error)) {
    events |= entry.path().filename().string().rfind("events.out", 0) == 0;
  }
  EXPECT_TRUE(events) << model_dir << "/validation";
}

// Trains the mlp 20 steps with Adam (2 workers x 48) in `model_dir`, with
// `num_ps` ps tasks (0: collective), resuming from its newest checkpoint.
void Train20(const std::string& name, int num_ps,
             const std::string& model_dir) {
  LocalCluster(num_ps, 2).Run(
      name, {"--model=mlp", "--optimizer=adam", "--learning_rate=0.002",
             "--steps=20", "--batch_size=48", "--model_dir=" + model_dir});
}

TEST(CollectiveEvaluation, StepZeroCheckpointHoldsTheInitialValues) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string collective_dir = TempPath("coll-zero-collective");
  Train20("coll-zero-collective", 0, collective_dir);
  const std::string zero = collective_dir + "/ckpt-0";
  ASSERT_TRUE(std::filesystem::exists(zero + "/index.pb"));
  ASSERT_TRUE(std::filesystem::exists(zero + "/worker-0.data"));
  // A ps run restores that checkpoint onto its ps task (values and Adam's
  // slots and step count) and trains 20 steps: it must end where a ps run
  // from the seed ends.
  const std::string resumed_dir = TempPath("coll-zero-resumed");
  std::filesystem::create_directories(resumed_dir);
  std::filesystem::copy(zero, resumed_dir + "/ckpt-0",
                        std::filesystem::copy_options::recursive);
  const Variables at_zero =
      ReadSafetensors(ExportSafetensors(resumed_dir, "coll-zero-at0"));
  Train20("coll-zero-resumed", 1, resumed_dir);
  const std::string seed_dir = TempPath("coll-zero-seed");
  Train20("coll-zero-seed", 1, seed_dir);
  const Variables resumed =
      ReadSafetensors(ExportSafetensors(resumed_dir, "coll-zero-resumed"));
  const Variables from_seed =
      ReadSafetensors(ExportSafetensors(seed_dir, "coll-zero-seed"));
  ASSERT_EQ(from_seed.size(), 3u);  // the mlp: dense/kernel, dense_1/*
  ASSERT_EQ(resumed.size(), 3u);
  ASSERT_EQ(at_zero.size(), 3u);
  double difference = 0;
  double trained = 0;
  for (const auto& [name, values] : from_seed) {
    ASSERT_EQ(resumed.at(name).size(), values.size()) << name;
    ASSERT_EQ(at_zero.at(name).size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      difference = std::max<double>(difference,
                                    std::fabs(values[i] - resumed.at(name)[i]));
      trained =
          std::max<double>(trained, std::fabs(values[i] - at_zero.at(name)[i]));
    }
  }
  std::printf(
      "from the collective step-0 checkpoint vs from the seed: %g; "
      "step 0 vs 20: %g\n",
      difference, trained);
  EXPECT_LE(difference, 1e-6);
  // The 20 steps did move the variables away from step 0's.
  EXPECT_GT(trained, 1e-3);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
