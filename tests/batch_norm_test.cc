// BatchNormalization's moving statistics on the ps: every example of the
// data is the same row, so every batch's mean is that row and its variance
// 0 whichever examples a worker draws, and after k sync steps of momentum m
// the ps must hold moving_mean = (1 - m^k) row and moving_variance = m^k
// (from the initial 0 and 1). Checked in the export of the final
// checkpoint, and again after a second chief resumes the run from that
// checkpoint for 3 more steps on data of another row, which a fresh start
// would fold in from 0; and in a run where both ps tasks are killed with
// SIGKILL mid-run and restored from the latest checkpoint. Real processes
// on 127.0.0.1.
#include <signal.h>
#include <sys/stat.h>

#include <cmath>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr double kMomentum = 0.9;
const std::vector<float> kRow = {0.5f, -1.0f, 2.0f};

// Input [3] -> BatchNormalization(momentum 0.9) -> Dense(2, softmax).
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {
  "name": "bn", "layers": [
    {"class_name": "InputLayer", "config": {"name": "x",
      "batch_input_shape": [null, 3]}},
    {"class_name": "BatchNormalization", "config": {"name": "bn",
      "momentum": 0.9}},
    {"class_name": "Dense", "config": {"name": "out", "units": 2,
      "activation": "softmax"}}]}})";

// `n` copies of kRow times `scale`, labels alternating.
std::string SameRows(int n, float scale) {
  std::string csv;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&csv, kRow[0] * scale, ",", kRow[1] * scale, ",",
                    kRow[2] * scale, ",", i % 2, "\n");
  }
  return csv;
}

// Expects the export of `model_dir` to hold moving_mean = mean * kRow and
// moving_variance = variance, within `tolerance`.
void ExpectMovingStatistics(const std::string& model_dir,
                            const std::string& name, double mean,
                            double variance, double tolerance = 1e-5) {
  const auto tensors = ReadSafetensors(ExportSafetensors(model_dir, name));
  ASSERT_EQ(tensors.count("bn/moving_mean"), 1u);
  ASSERT_EQ(tensors.count("bn/moving_variance"), 1u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(tensors.at("bn/moving_mean")[c], mean * kRow[c], tolerance)
        << name << ", channel " << c;
    EXPECT_NEAR(tensors.at("bn/moving_variance")[c], variance, tolerance)
        << name << ", channel " << c;
  }
}

TEST(BatchNormalization, ThePsFoldsTheBatchStatisticsIntoTheMovingOnes) {
  const std::string data_dir = TempPath("bn-data");
  mkdir(data_dir.c_str(), 0755);
  EXPECT_TRUE(WriteFile(data_dir + "/train.csv", SameRows(256, 1)));
  EXPECT_TRUE(WriteFile(data_dir + "/test.csv", SameRows(32, 1)));
  const std::string model = TempPath("bn-model.json");
  EXPECT_TRUE(WriteFile(model, kModel));
  const std::string model_dir = TempPath("bn-run");
  const std::vector<std::string> flags = {
      "--model=" + model, "--data_dir=" + data_dir, "--mode=sync",
      "--batch_size=8", "--model_dir=" + model_dir};
  const std::vector<std::string> worker_flags = {"--data_dir=" + data_dir};
  std::vector<std::string> first = flags;
  first.push_back("--steps=5");
  LocalCluster(2, 2).Run("bn-5", first, worker_flags);
  const double kept5 = std::pow(kMomentum, 5);
  ExpectMovingStatistics(model_dir, "bn-5-export", 1 - kept5, kept5);

  // A new chief resumes the run from its checkpoint at step 5, on rows
  // twice kRow.
  EXPECT_TRUE(WriteFile(data_dir + "/train.csv", SameRows(256, 2)));
  std::vector<std::string> resumed = flags;
  resumed.push_back("--steps=8");
  LocalCluster(2, 2).Run("bn-8", resumed, worker_flags);
  const double kept3 = std::pow(kMomentum, 3);
  ExpectMovingStatistics(model_dir, "bn-8-export",
                         kept3 * (1 - kept5) + (1 - kept3) * 2,
                         kept3 * kept5);
}

// The highest step of the chief's progress lines ("step 120/300"); -1 if
// none.
int64_t LastStep(const std::string& log) {
  static const std::regex kProgress("step ([0-9]+)/[0-9]+");
  int64_t last = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kProgress);
       it != std::sregex_iterator(); ++it) {
    last = std::max<int64_t>(last, std::stoll((*it)[1]));
  }
  return last;
}

// Both ps tasks are killed with SIGKILL at once mid-run and started again:
// the chief restores them from the latest checkpoint and the lost steps are
// trained again, so the moving statistics end as if nothing happened:
// after k steps, (1 - m^k) kRow and m^k. A slow momentum keeps m^k far from
// 0 over enough steps to kill in the middle.
TEST(BatchNormalization, MovingStatisticsSurviveKilledPsTasks) {
  constexpr int kSteps = 600;
  constexpr double kSlowMomentum = 0.998;
  const std::string data_dir = TempPath("bn-kill-data");
  mkdir(data_dir.c_str(), 0755);
  EXPECT_TRUE(WriteFile(data_dir + "/train.csv", SameRows(256, 1)));
  EXPECT_TRUE(WriteFile(data_dir + "/test.csv", SameRows(32, 1)));
  const std::string model = TempPath("bn-kill-model.json");
  EXPECT_TRUE(WriteFile(
      model, absl::StrReplaceAll(
                 kModel, {{"\"momentum\": 0.9", "\"momentum\": 0.998"}})));
  const std::string model_dir = TempPath("bn-kill-run");
  const LocalCluster cluster(2, 2);
  std::vector<std::unique_ptr<Subprocess>> ps, workers;
  for (int i = 0; i < 2; ++i) {
    ps.push_back(std::make_unique<Subprocess>(
        cluster.Start("bn-kill", "ps", i, {"--model_dir=" + model_dir})));
    workers.push_back(std::make_unique<Subprocess>(
        cluster.Start("bn-kill", "worker", i, {"--data_dir=" + data_dir})));
  }
  Subprocess chief = cluster.Start(
      "bn-kill", "chief", 0,
      {"--model=" + model, "--data_dir=" + data_dir, "--mode=sync",
       "--batch_size=8", "--model_dir=" + model_dir,
       absl::StrCat("--steps=", kSteps), "--checkpoint_every_steps=50",
       "--print_every_steps=10", "--failure_timeout=5s"});

  // Past the second checkpoint, well before the end.
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (LastStep(Log(chief)) < 120 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const int64_t at = LastStep(Log(chief));
  ASSERT_GE(at, 120) << Log(chief);
  ASSERT_LT(at, kSteps) << "the run ended before the kill";
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ps[i]->Stop(SIGKILL), 128 + SIGKILL);
    ps[i] = std::make_unique<Subprocess>(cluster.Start(
        "bn-kill-restarted", "ps", i, {"--model_dir=" + model_dir}));
  }
  std::printf("killed both ps tasks after step %ld\n", static_cast<long>(at));

  EXPECT_EQ(chief.Wait(300), 0) << Log(chief);
  for (auto& p : ps) EXPECT_EQ(p->Wait(60), 0) << Log(*p);
  for (auto& p : workers) EXPECT_EQ(p->Wait(60), 0) << Log(*p);
  const std::string log = Log(chief);
  EXPECT_NE(log.find("recovered in"), std::string::npos) << log;
  EXPECT_NE(log.find("steps are trained again"), std::string::npos) << log;
  // Float sums over 600 steps: within 1e-4 of the exact value.
  const double kept = std::pow(kSlowMomentum, kSteps);
  ExpectMovingStatistics(model_dir, "bn-kill-export", 1 - kept, kept, 1e-4);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
