// The chief's Driver deciding what a failure costs, in a cluster inside the
// test process (tests/in_process_cluster.h: real ps services over gRPC on
// 127.0.0.1, real Trainers, the chief's own RunState): a ps task that lost
// its shard is restored from the newest checkpoint and the run ends as an
// undisturbed one would; a ps task that registers again but kept its shard,
// or that could not be reached for a moment, is not rolled back and applies
// no push twice; a dead worker's share is trained by the others under
// --on_worker_failure=continue; a chief killed and started again while a
// worker is dead waits for that worker, or goes on without it under
// continue, and the run ends as undisturbed. Each global batch is counted on
// the ps tasks (--count_batches), so a batch lost or applied twice fails a
// test.
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chief/checkpoint_test_util.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"

namespace pstrain {
namespace testing {
namespace {

InProcessClusterOptions Options(const std::string& name) {
  InProcessClusterOptions options;
  options.model_dir = chief::testing::FreshDir(name);
  return options;
}

// Each global batch of steps [from, to) of a run of `workers`, once.
std::map<int64_t, int> Once(int64_t from, int64_t to, int workers) {
  std::map<int64_t, int> batches;
  for (int64_t b = from * workers; b < to * workers; ++b) batches[b] = 1;
  return batches;
}

using Variables = std::map<std::string, std::vector<float>>;

// The variables of an undisturbed run with `options`. Run once per test
// process for each setting that could matter (model_dir does not): each run
// of the cluster costs about a second on a loaded machine.
Variables Undisturbed(InProcessClusterOptions options) {
  static absl::Mutex mu;
  // Guarded by mu (held throughout).
  static auto* const runs =
      new std::map<std::pair<bool, absl::Duration>, Variables>();
  const std::pair<bool, absl::Duration> key(
      options.continue_without_dead_workers, options.failure_timeout);
  absl::MutexLock lock(&mu);
  auto it = runs->find(key);
  if (it != runs->end()) return it->second;
  options.model_dir += "-undisturbed";
  options.model_dir = chief::testing::FreshDir(options.model_dir.substr(
      options.model_dir.rfind('/') + 1));
  InProcessCluster cluster(options);
  EXPECT_TRUE(cluster.Start().ok());
  EXPECT_TRUE(cluster.Run().ok());
  absl::StatusOr<Variables> variables = cluster.Variables();
  EXPECT_TRUE(variables.ok()) << variables.status();
  if (!variables.ok()) return Variables();
  return (*runs)[key] = *variables;
}

TEST(Driver, AnUndisturbedRunAppliesEveryBatchOnce) {
  InProcessCluster cluster(Options("undisturbed"));
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_TRUE(cluster.Run().ok());
  for (int w = 0; w < 2; ++w) EXPECT_TRUE(cluster.worker_status(w).ok());
  for (int task = 0; task < 2; ++task) {
    EXPECT_EQ(cluster.BatchesApplied(task), Once(0, cluster.total_steps(), 2));
  }
  EXPECT_EQ(cluster.state().generation(), 0);
}

TEST(Driver, APsThatLostItsShardIsRestoredAndTheRunEndsAsUndisturbed) {
  const InProcessClusterOptions options = Options("ps-lost");
  InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  // After the checkpoint of step 4, ps 1 restarts with an empty shard.
  std::thread fault([&] {
    cluster.WaitForStep(6);
    EXPECT_TRUE(cluster.RestartPs(1).ok());
  });
  const absl::Status status = cluster.Run();
  fault.join();
  ASSERT_TRUE(status.ok()) << status;
  for (int w = 0; w < 2; ++w) EXPECT_TRUE(cluster.worker_status(w).ok());
  EXPECT_EQ(cluster.state().generation(), 1);
  const int64_t restored = cluster.state().start_step();
  EXPECT_GE(restored, 4);
  EXPECT_LT(restored, 6 + 1);
  // The restore took back what ps 0 applied after the checkpoint; ps 1
  // applied the steps since.
  EXPECT_EQ(cluster.BatchesApplied(0), Once(0, cluster.total_steps(), 2));
  EXPECT_EQ(cluster.BatchesApplied(1),
            Once(restored, cluster.total_steps(), 2));
  absl::StatusOr<Variables> variables = cluster.Variables();
  ASSERT_TRUE(variables.ok()) << variables.status();
  EXPECT_EQ(*variables, Undisturbed(options));
}

TEST(Driver, ARestoreWaitsForAPsThatCannotBeReachedForAMoment) {
  const InProcessClusterOptions options = Options("restore-waits");
  InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  // Ps 1 restarts; while the chief restores, ps 0 cannot be reached.
  std::thread fault([&] {
    cluster.WaitForStep(6);
    EXPECT_TRUE(cluster.RestartPs(1).ok());
    // Until the chief's restore tried to reach it again.
    EXPECT_TRUE(cluster.CutOffPs(0, JOB_CHIEF).ok());
  });
  const absl::Status status = cluster.Run();
  fault.join();
  ASSERT_TRUE(status.ok()) << status;
  for (int w = 0; w < 2; ++w) EXPECT_TRUE(cluster.worker_status(w).ok());
  EXPECT_EQ(cluster.state().generation(), 1);
  absl::StatusOr<Variables> variables = cluster.Variables();
  ASSERT_TRUE(variables.ok()) << variables.status();
  EXPECT_EQ(*variables, Undisturbed(options));
}

TEST(Driver, APsThatKeptItsShardIsNotRolledBack) {
  InProcessCluster cluster(Options("ps-kept"));
  ASSERT_TRUE(cluster.Start().ok());
  std::thread fault([&] {
    cluster.WaitForStep(6);
    EXPECT_TRUE(cluster.ReregisterPs(1).ok());
  });
  const absl::Status status = cluster.Run();
  fault.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(cluster.state().generation(), 0);
  for (int task = 0; task < 2; ++task) {
    EXPECT_EQ(cluster.BatchesApplied(task), Once(0, cluster.total_steps(), 2));
  }
}

TEST(Driver, APsCutOffForAMomentLosesAndRepeatsNothing) {
  const InProcessClusterOptions options = Options("ps-cut-off");
  InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  // Pushes of step 5 may reach ps 0 and not ps 1: the workers push the
  // step again, and ps 0 keeps what it holds.
  std::thread fault([&] {
    cluster.WaitForStep(5);
    // Until a worker tried a call to it again.
    EXPECT_TRUE(cluster.CutOffPs(1, JOB_WORKER).ok());
  });
  const absl::Status status = cluster.Run();
  fault.join();
  ASSERT_TRUE(status.ok()) << status;
  for (int w = 0; w < 2; ++w) EXPECT_TRUE(cluster.worker_status(w).ok());
  EXPECT_EQ(cluster.state().generation(), 0);
  for (int task = 0; task < 2; ++task) {
    EXPECT_EQ(cluster.BatchesApplied(task), Once(0, cluster.total_steps(), 2));
  }
  absl::StatusOr<Variables> variables = cluster.Variables();
  ASSERT_TRUE(variables.ok()) << variables.status();
  EXPECT_EQ(*variables, Undisturbed(options));
}

TEST(Driver, UnderContinueADeadWorkersShareIsTrainedByTheOthers) {
  InProcessClusterOptions options = Options("worker-dead");
  options.continue_without_dead_workers = true;
  options.failure_timeout = absl::Milliseconds(500);
  InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  // Worker 1 dies at step 3: silent, it is presumed dead.
  std::thread fault([&] {
    cluster.WaitForStep(3);
    cluster.KillWorker(1);
  });
  const absl::Status status = cluster.Run();
  fault.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(cluster.worker_status(0).ok()) << cluster.worker_status(0);
  EXPECT_EQ(cluster.state().membership().absent_size(), 1);
  for (int task = 0; task < 2; ++task) {
    EXPECT_EQ(cluster.BatchesApplied(task), Once(0, cluster.total_steps(), 2));
  }
}

// Worker 1 dies after the checkpoint of step 4, and the chief is killed
// before it notices; a new chief starts on the checkpoints.
void KillWorkerThenChief(InProcessCluster* cluster) {
  cluster->WaitForStep(6);
  cluster->KillWorker(1);
  EXPECT_TRUE(cluster->RestartChief().ok());
}

TEST(Driver, ARestartedChiefWaitsForAWorkerThatDiedBeforeIt) {
  InProcessClusterOptions options = Options("chief-restart-wait");
  InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  std::thread fault([&] {
    KillWorkerThenChief(&cluster);
    // The new chief waits for worker 1 before it trains: once worker 0 is
    // back with it, it has all it would need to go on without, and looks
    // (every 20 ms) ten times more.
    while (cluster.state().TasksAlive().count("worker:0") == 0) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_LT(cluster.state().phase(), PHASE_TRAINING);
    EXPECT_TRUE(cluster.RestartWorker(1).ok());
  });
  const absl::Status status = cluster.Run();
  fault.join();
  ASSERT_TRUE(status.ok()) << status;
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(cluster.worker_status(w).ok()) << cluster.worker_status(w);
  }
  EXPECT_EQ(cluster.state().membership().absent_size(), 0);
  EXPECT_GE(cluster.state().start_step(), 4);
  for (int task = 0; task < 2; ++task) {
    EXPECT_EQ(cluster.BatchesApplied(task), Once(0, cluster.total_steps(), 2));
  }
  absl::StatusOr<Variables> variables = cluster.Variables();
  ASSERT_TRUE(variables.ok()) << variables.status();
  EXPECT_EQ(*variables, Undisturbed(options));
}

TEST(Driver, UnderContinueARestartedChiefGoesOnWithoutAWorkerDeadBeforeIt) {
  InProcessClusterOptions options = Options("chief-restart-continue");
  options.continue_without_dead_workers = true;
  options.failure_timeout = absl::Milliseconds(500);
  InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  std::thread fault([&] { KillWorkerThenChief(&cluster); });
  const absl::Status status = cluster.Run();
  fault.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(cluster.worker_status(0).ok()) << cluster.worker_status(0);
  // Worker 0 trained worker 1's share from the restored checkpoint on.
  ASSERT_EQ(cluster.state().membership().absent_size(), 1);
  EXPECT_EQ(cluster.state().membership().absent(0).index(), 1);
  EXPECT_GE(cluster.state().start_step(), 4);
  for (int task = 0; task < 2; ++task) {
    EXPECT_EQ(cluster.BatchesApplied(task), Once(0, cluster.total_steps(), 2));
  }
  absl::StatusOr<Variables> variables = cluster.Variables();
  ASSERT_TRUE(variables.ok()) << variables.status();
  EXPECT_EQ(*variables, Undisturbed(options));
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
