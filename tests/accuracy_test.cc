// One epoch of the mlp on Fashion-MNIST with 2 ps and 2 workers, sync and
// async, reaches the test accuracy users expect (>= 0.80). Real processes on
// 127.0.0.1.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

double TrainOneEpoch(const std::string& mode) {
  const std::string model_dir = TempPath(mode);
  std::vector<std::string> flags = {"--model=mlp", "--epochs=1",
                                    "--mode=" + mode,
                                    "--model_dir=" + model_dir};
  if (mode == "async") flags.push_back("--max_staleness=8");
  LocalCluster(2, 2).Run(mode, flags);
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  if (!summary.is_object()) return 0;
  EXPECT_EQ(summary["epochs"].get<double>(), 1.0);
  std::printf("%s: %s\n", mode.c_str(), summary.dump(2).c_str());
  return summary["test_accuracy"].get<double>();
}

TEST(Accuracy, OneEpochOfTheMlpSync) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  EXPECT_GE(TrainOneEpoch("sync"), 0.80);
}

TEST(Accuracy, OneEpochOfTheMlpAsync) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  EXPECT_GE(TrainOneEpoch("async"), 0.80);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
