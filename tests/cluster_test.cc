// A whole run as real processes on 127.0.0.1: a chief, ps tasks and workers
// started from their binaries with TF_CONFIG, training the mlp on
// Fashion-MNIST for a few dozen steps.
#include <signal.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "common/cluster_spec.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "common/tf_config.h"
#include "grpcpp/impl/client_unary_call.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

TEST(Cluster, SyncRunOfTheMlpFinishesAndEveryTaskExits) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(2, 2);
  std::vector<Subprocess> tasks;
  for (int i = 0; i < 2; ++i) tasks.push_back(cluster.Start("sync", "ps", i));
  for (int i = 0; i < 2; ++i)
    tasks.push_back(cluster.Start("sync", "worker", i));
  const std::string model_dir = TempPath("sync-model");
  Subprocess chief = cluster.Start(
      "sync", "chief", 0,
      {"--model=mlp", "--optimizer=adam", "--steps=60", "--batch_size=32",
       "--print_every_steps=20", "--model_dir=" + model_dir});
  ASSERT_EQ(chief.Wait(240), 0) << Log(chief);
  for (Subprocess& task : tasks) EXPECT_EQ(task.Wait(60), 0) << Log(task);

  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  EXPECT_EQ(summary["global_step"], 60);
  EXPECT_EQ(summary["mode"], "sync");
  EXPECT_EQ(summary["num_workers"], 2);
  EXPECT_EQ(summary["num_ps"], 2);
  // 60 steps of Adam on 3,840 images already beat chance (10%) by far.
  EXPECT_GT(summary["test_accuracy"].get<double>(), 0.5);
  EXPECT_GT(summary["images_per_sec"].get<double>(), 0);
  const std::string log = Log(chief);
  EXPECT_NE(log.find("epoch 1/1  step 60/60  loss "), std::string::npos) << log;
  EXPECT_NE(Log(tasks[0]).find("ps 0: the chief says the run is finished"),
            std::string::npos)
      << Log(tasks[0]);
}

TEST(Cluster, AsyncRunFinishes) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 2);
  std::vector<Subprocess> tasks;
  tasks.push_back(cluster.Start("async", "ps", 0));
  for (int i = 0; i < 2; ++i)
    tasks.push_back(cluster.Start("async", "worker", i));
  const std::string model_dir = TempPath("async-model");
  Subprocess chief =
      cluster.Start("async", "chief", 0,
                    {"--model=mlp", "--mode=async", "--max_staleness=4",
                     "--steps=40", "--model_dir=" + model_dir});
  ASSERT_EQ(chief.Wait(240), 0) << Log(chief);
  for (Subprocess& task : tasks) EXPECT_EQ(task.Wait(60), 0) << Log(task);
  EXPECT_NE(ReadFile(model_dir + "/summary.json").find("\"mode\": \"async\""),
            std::string::npos);
}

// Three workers, two gradients per step: the straggler's late gradients are
// dropped and counted, and the run finishes.
TEST(Cluster, BackupWorkersLateGradientsAreCountedInTheSummary) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 3);
  std::vector<Subprocess> tasks;
  tasks.push_back(cluster.Start("backup", "ps", 0));
  tasks.push_back(cluster.Start("backup", "worker", 0));
  tasks.push_back(cluster.Start("backup", "worker", 1));
  tasks.push_back(cluster.Start("backup", "worker", 2, {"--push_delay_ms=50"}));
  const std::string model_dir = TempPath("backup-model");
  Subprocess chief =
      cluster.Start("backup", "chief", 0,
                    {"--model=mlp", "--replicas_to_aggregate=2", "--steps=20",
                     "--batch_size=32", "--model_dir=" + model_dir});
  ASSERT_EQ(chief.Wait(240), 0) << Log(chief);
  for (Subprocess& task : tasks) EXPECT_EQ(task.Wait(60), 0) << Log(task);
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["global_step"], 20);
  EXPECT_GE(summary["dropped_late_gradients"].get<int>(), 1) << summary.dump();
}

TEST(Cluster, ChiefNamesTheTasksThatNeverCame) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 2);
  Subprocess ps = cluster.Start("missing", "ps", 0);
  Subprocess worker = cluster.Start("missing", "worker", 0);
  Subprocess chief =
      cluster.Start("missing", "chief", 0,
                    {"--model=mlp", "--steps=10", "--wait_for_tasks_seconds=3",
                     "--model_dir=" + TempPath("missing")});
  EXPECT_EQ(chief.Wait(120), 1);
  const std::string log = Log(chief);
  EXPECT_NE(log.find("these tasks never registered: worker:1"),
            std::string::npos)
      << log;
  // The others learn the run failed and stop.
  EXPECT_EQ(ps.Wait(60), 0) << Log(ps);
  EXPECT_NE(Log(ps).find("the chief says the run failed"), std::string::npos);
  EXPECT_EQ(worker.Wait(60), 1) << Log(worker);
}

TEST(Cluster, WorkerFromAnotherClusterIsRefused) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 1);
  LocalCluster other = cluster;
  other.AddWorker();
  Subprocess ps = cluster.Start("stranger", "ps", 0);
  Subprocess chief =
      cluster.Start("stranger", "chief", 0,
                    {"--model=mlp", "--steps=5", "--wait_for_tasks_seconds=5",
                     "--model_dir=" + TempPath("stranger")});
  Subprocess stranger = other.Start("stranger", "worker", 0);
  EXPECT_EQ(stranger.Wait(60), 1);
  EXPECT_NE(Log(stranger).find("worker:0's TF_CONFIG names another cluster"),
            std::string::npos)
      << Log(stranger);
  EXPECT_EQ(chief.Wait(60), 1);
  EXPECT_EQ(ps.Wait(60), 0);
}

// gRPC's standard health check (what Kubernetes probes ask) at `address`.
absl::Status CheckHealth(const std::string& address) {
  auto channel = CreatePstrainChannel(address);
  const grpc::internal::RpcMethod check("/grpc.health.v1.Health/Check",
                                        grpc::internal::RpcMethod::NORMAL_RPC,
                                        channel);
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  grpc::Slice empty{std::string()};
  grpc::ByteBuffer request(&empty, 1), response;
  return FromGrpcStatus(
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), check, &context, request, &response));
}

TEST(Cluster, EveryTaskServesTheHealthServiceAtItsAddress) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 1);
  absl::StatusOr<TfConfig> config = ParseTfConfig(cluster.TfConfig("chief", 0));
  ASSERT_TRUE(config.ok()) << config.status();
  // Before the chief is up: the ps and the worker are waiting for it.
  Subprocess ps = cluster.Start("health", "ps", 0);
  Subprocess worker = cluster.Start("health", "worker", 0);
  for (JobType job : {JOB_PS, JOB_WORKER}) {
    const std::string address =
        config->cluster.Address(MakeTask(job, 0))->ToString();
    EXPECT_TRUE(CheckHealth(address).ok()) << JobName(job) << " " << address;
  }
  worker.Stop(SIGKILL);
  EXPECT_EQ(ps.Terminate(), 0) << Log(ps);
}

TEST(Cluster, BinariesRefuseBadFlagsWithStatusTwo) {
  const LocalCluster cluster(1, 1);
  const std::string model_dir = TempPath("bad-flags");
  Subprocess chief = cluster.Start(
      "flags", "chief", 0, {"--optimizer=rmsprop", "--model_dir=" + model_dir});
  EXPECT_EQ(chief.Wait(60), 2);
  EXPECT_EQ(Log(chief),
            "--optimizer: \"rmsprop\" is not sgd, momentum, adagrad or adam\n");
  Subprocess model =
      cluster.Start("flags", "chief", 0,
                    {"--model=/nonexistent.json", "--model_dir=" + model_dir});
  EXPECT_EQ(model.Wait(60), 2);
  EXPECT_NE(Log(model).find("model \"/nonexistent.json\": "), std::string::npos)
      << Log(model);
  struct stat st;
  EXPECT_NE(stat(model_dir.c_str(), &st), 0) << "nothing may be written";
  // A worker checks its flags before it contacts the chief (none runs
  // here: one that did not would wait for it).
  const std::pair<std::string, std::string> worker_cases[] = {
      {"--device=tpu", "--device: \"tpu\" is not auto, cpu, gpu or gpu:N"},
      {"--threads=100000", "--threads: 100000 must be in [0, 1024]"},
      {"--report_every_steps=0", "--report_every_steps: 0 must be >= 1"},
      {"--push_delay_ms=-1", "--push_delay_ms: -1 must be >= 0"},
      {"--chief_patience_seconds=0",
       "--chief_patience_seconds: 0 must be >= 1"},
      {"--allreduce_backend=mpi",
       "--allreduce_backend: \"mpi\" must be auto, ring or nccl"},
      {"--allreduce_timeout_seconds=0",
       "--allreduce_timeout_seconds: 0 must be >= 1"},
      {"--export_replica_dir=/proc/self/replicas",
       "--export_replica_dir: mkdir /proc/self/replicas: No such file or "
       "directory"},
  };
  for (const auto& [flag, line] : worker_cases) {
    Subprocess worker = cluster.Start("flags", "worker", 0, {flag});
    EXPECT_EQ(worker.Wait(60), 2) << flag;
    EXPECT_EQ(Log(worker), line + "\n");
  }
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
