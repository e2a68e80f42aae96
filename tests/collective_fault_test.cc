// A collective run survives a worker killed with SIGKILL: the others'
// all-reduce fails instead of hanging, the chief holds the workers until the
// killed one is started again, every worker restores the newest checkpoint
// (written by worker 0) in a new recovery generation, and the run ends with
// exactly the variables of an undisturbed run (the steps after the
// checkpoint are trained again on the same data). Real processes on
// 127.0.0.1.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

std::vector<std::string> ChiefFlags(const std::string& model_dir) {
  return {"--model=mlp",
          "--optimizer=sgd",
          "--learning_rate=0.05",
          "--steps=160",
          "--batch_size=32",
          "--checkpoint_every_steps=40",
          "--failure_timeout=3s",
          "--model_dir=" + model_dir};
}

std::vector<std::string> WorkerFlags(const std::string& model_dir) {
  return {"--model_dir=" + model_dir, "--allreduce_timeout_seconds=5",
          "--chief_patience_seconds=120"};
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(CollectiveFault, AKilledWorkerIsRestoredWithTheOthers) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string undisturbed_dir = TempPath("undisturbed-model");
  LocalCluster(0, 3).Run("undisturbed", ChiefFlags(undisturbed_dir),
                         WorkerFlags(undisturbed_dir));

  const std::string model_dir = TempPath("fault-model");
  LocalCluster cluster(0, 3);
  std::vector<Subprocess> workers;
  for (int w = 0; w < 3; ++w) {
    workers.push_back(cluster.Start("fault", "worker", w,
                                    WorkerFlags(model_dir)));
  }
  Subprocess chief = cluster.Start("fault", "chief", 0, ChiefFlags(model_dir));
  // Once the checkpoint of step 40 is there, worker 1 dies mid-run.
  bool checkpointed = false;
  for (int i = 0; i < 1200 && !checkpointed; ++i) {
    checkpointed = Exists(model_dir + "/ckpt-40/index.pb");
    if (!checkpointed) usleep(100 * 1000);
  }
  ASSERT_TRUE(checkpointed) << Log(chief);
  EXPECT_EQ(workers[1].Stop(SIGKILL), 128 + SIGKILL);
  // Started again, as Kubernetes or run_cluster.sh --restart_failed would.
  Subprocess restarted =
      cluster.Start("fault-restarted", "worker", 1, WorkerFlags(model_dir));
  EXPECT_EQ(chief.Wait(300), 0) << Log(chief);
  for (int w : {0, 2}) EXPECT_EQ(workers[w].Wait(60), 0) << Log(workers[w]);
  EXPECT_EQ(restarted.Wait(60), 0) << Log(restarted);
  const std::string log = Log(chief);
  EXPECT_TRUE(absl::StrContains(log, "chief: recovered")) << log;
  EXPECT_TRUE(absl::StrContains(Log(workers[0]), "restoring")) << Log(workers[0]);
  // The restarted worker trains only from the restored checkpoint.
  EXPECT_TRUE(absl::StrContains(Log(restarted), "restoring")) << Log(restarted);

  const auto undisturbed =
      ReadSafetensors(ExportSafetensors(undisturbed_dir, "undisturbed"));
  const auto recovered = ReadSafetensors(ExportSafetensors(model_dir, "fault"));
  ASSERT_EQ(undisturbed.size(), 3u);
  ASSERT_EQ(recovered.size(), undisturbed.size());
  double largest = 0;
  for (const auto& [name, values] : undisturbed) {
    const std::vector<float>& other = recovered.at(name);
    ASSERT_EQ(other.size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      largest = std::max(largest, std::fabs(double{values[i]} - other[i]));
    }
  }
  std::printf("recovered vs undisturbed: largest difference %g\n", largest);
  EXPECT_LE(largest, 1e-5);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
