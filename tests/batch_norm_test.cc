// BatchNormalization's moving statistics on the ps: every example of the
// data is the same row, so every batch's mean is that row and its variance
// 0 whichever examples a worker draws, and after k sync steps of momentum m
// the ps must hold moving_mean = (1 - m^k) row and moving_variance = m^k
// (from the initial 0 and 1). Checked in the export of the final
// checkpoint, and again after a second chief resumes the run from that
// checkpoint for 3 more steps on data of another row, which a fresh start
// would fold in from 0. Real processes on 127.0.0.1.
#include <sys/stat.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Expects the export of `model_dir` to hold moving_mean = mean(kRow) and
// moving_variance = variance.
void ExpectMovingStatistics(const std::string& model_dir,
                            const std::string& name, double mean,
                            double variance) {
  const auto tensors = ReadSafetensors(ExportSafetensors(model_dir, name));
  ASSERT_EQ(tensors.count("bn/moving_mean"), 1u);
  ASSERT_EQ(tensors.count("bn/moving_variance"), 1u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(tensors.at("bn/moving_mean")[c], mean * kRow[c], 1e-5)
        << name << ", channel " << c;
    EXPECT_NEAR(tensors.at("bn/moving_variance")[c], variance, 1e-5)
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

}  // namespace
}  // namespace testing
}  // namespace pstrain
