// A collective run's checkpoints (written by worker 0) are a ps run's
// checkpoints: a run trained 30 steps in one mode and resumed to 50 in the
// other ends where 50 uninterrupted steps in the second mode end (Adam, so
// the optimizer's slots and step count travel too). Real processes on
// 127.0.0.1; variables compared through `chief --export_safetensors`.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

using Variables = std::map<std::string, std::vector<float>>;

// Trains `steps` steps of the mlp (2 workers x 48, Adam) in `model_dir`,
// resuming from its newest checkpoint if it has one; num_ps 0: collective.
void Train(const std::string& name, int num_ps, int steps,
           const std::string& model_dir) {
  LocalCluster(num_ps, 2).Run(
      name, {"--model=mlp", "--optimizer=adam", "--learning_rate=0.002",
             absl::StrCat("--steps=", steps), "--batch_size=48",
             "--model_dir=" + model_dir});
}

// 30 steps with `first_ps` ps tasks, then to 50 with `then_ps`; against 50
// with `then_ps` at once.
void ExpectResumedEqualsUninterrupted(const std::string& name, int first_ps,
                                      int then_ps) {
  const std::string resumed_dir = TempPath(name + "-resumed");
  Train(name + "-first", first_ps, 30, resumed_dir);
  const Variables at30 =
      ReadSafetensors(ExportSafetensors(resumed_dir, name + "-at30"));
  Train(name + "-then", then_ps, 50, resumed_dir);
  const std::string straight_dir = TempPath(name + "-straight");
  Train(name + "-straight", then_ps, 50, straight_dir);
  const Variables resumed =
      ReadSafetensors(ExportSafetensors(resumed_dir, name + "-resumed"));
  const Variables straight =
      ReadSafetensors(ExportSafetensors(straight_dir, name + "-straight"));
  ASSERT_EQ(resumed.size(), 3u);  // the mlp: dense/kernel, dense_1/*
  ASSERT_EQ(straight.size(), 3u);
  const double difference = LargestDifference(resumed, straight);
  const double trained = LargestDifference(at30, straight);
  std::printf("%s: resumed vs uninterrupted %g; step 30 vs 50 %g\n",
              name.c_str(), difference, trained);
  EXPECT_LE(difference, 1e-5);
  // The resumed run did train on from step 30.
  EXPECT_GT(trained, 1e-3);
}

TEST(CollectiveCheckpoint, CollectiveCheckpointResumesInAPsRun) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  ExpectResumedEqualsUninterrupted("collective-to-ps", 0, 1);
}

TEST(CollectiveCheckpoint, PsCheckpointResumesInACollectiveRun) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  // Two ps tasks: each variable is restored from the slices of both.
  ExpectResumedEqualsUninterrupted("ps-to-collective", 2, 0);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
