// One epoch of the mlp on Fashion-MNIST with 2 ps and 2 workers, sync and
// async, reaches the test accuracy users expect (>= 0.80). Real processes on
// 127.0.0.1.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

double TrainOneEpoch(const std::string& mode) {
  std::vector<std::string> ps, workers;
  const std::string chief = absl::StrCat("\"127.0.0.1:", PickFreePort(), "\"");
  for (int i = 0; i < 2; ++i) {
    ps.push_back(absl::StrCat("\"127.0.0.1:", PickFreePort(), "\""));
    workers.push_back(absl::StrCat("\"127.0.0.1:", PickFreePort(), "\""));
  }
  auto tf_config = [&](const std::string& type, int index) {
    return absl::StrCat("{\"cluster\": {\"chief\": [", chief, "], \"ps\": [",
                        absl::StrJoin(ps, ", "), "], \"worker\": [",
                        absl::StrJoin(workers, ", "), "]}, \"task\": {\"type\": \"",
                        type, "\", \"index\": ", index, "}}");
  };
  std::vector<Subprocess> tasks;
  for (const std::string type : {"ps", "worker"}) {
    for (int i = 0; i < 2; ++i) {
      tasks.push_back(Subprocess::Start(
          type + "/" + type, {}, {{"TF_CONFIG", tf_config(type, i)}},
          TempPath(absl::StrCat(mode, "-", type, i, ".log"))));
    }
  }
  const std::string model_dir = TempPath(mode);
  Subprocess main = Subprocess::Start(
      "chief/chief",
      {"--model=mlp", "--epochs=1", "--mode=" + mode, "--max_staleness=8",
       "--model_dir=" + model_dir},
      {{"TF_CONFIG", tf_config("chief", 0)}}, TempPath(mode + "-chief.log"));
  EXPECT_EQ(main.Wait(600), 0) << ReadFile(main.log_path());
  for (Subprocess& task : tasks) EXPECT_EQ(task.Wait(60), 0);
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  if (!summary.is_object()) return 0;
  EXPECT_EQ(summary["epochs"].get<double>(), 1.0);
  std::printf("%s: %s", mode.c_str(), summary.dump(2).c_str());
  return summary["test_accuracy"].get<double>();
}

bool HaveData() {
  struct stat st;
  return stat((std::string(kData) + "/train-images-idx3-ubyte.gz").c_str(),
              &st) == 0;
}

TEST(Accuracy, OneEpochOfTheMlpSync) {
  if (!HaveData()) GTEST_SKIP() << "skipped: no Fashion-MNIST at " << kData;
  EXPECT_GE(TrainOneEpoch("sync"), 0.80);
}

TEST(Accuracy, OneEpochOfTheMlpAsync) {
  if (!HaveData()) GTEST_SKIP() << "skipped: no Fashion-MNIST at " << kData;
  EXPECT_GE(TrainOneEpoch("async"), 0.80);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
