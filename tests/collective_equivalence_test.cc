// A collective run (TF_CONFIG without a "ps" job: the workers hold the
// model and all-reduce their gradients) trains what a sync ps run with the
// same seed, workers and global batch trains: the mlp, 50 steps of a global
// batch of 96, with 2 workers x 48 and 3 workers x 32 in collective mode,
// against ps runs (1 ps, 2 x 48; 2 ps, 3 x 32) of the same. The collective
// runs' checkpoints (written by worker 0) are compared through `chief
// --export_safetensors`, and every worker's own copy (--export_replica_dir)
// must equal worker 0's bit for bit. Real processes on 127.0.0.1.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
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

struct Trained {
  Variables exported;               // the final checkpoint's
  std::vector<Variables> replicas;  // each worker's own (collective)
};

Trained Train(const std::string& name, int num_ps, int workers, int batch,
              const std::string& optimizer,
              const std::string& allreduce_dtype = "float32") {
  const std::string model_dir = TempPath(name + "-model");
  const std::string replicas = TempPath(name + "-replicas");
  std::vector<std::string> worker_flags;
  if (num_ps == 0) {
    std::filesystem::create_directories(replicas);
    worker_flags.push_back("--export_replica_dir=" + replicas);
  }
  std::vector<std::string> chief_flags = {"--model=mlp",
                                          "--optimizer=" + optimizer,
                                          "--learning_rate=0.05",
                                          "--steps=50",
                                          absl::StrCat("--batch_size=", batch),
                                          "--model_dir=" + model_dir};
  // The chief's, handed to the workers with the run.
  if (num_ps == 0)
    chief_flags.push_back("--allreduce_dtype=" + allreduce_dtype);
  LocalCluster(num_ps, workers).Run(name, chief_flags, worker_flags);
  Trained trained;
  trained.exported = ReadSafetensors(ExportSafetensors(model_dir, name));
  if (num_ps == 0) {
    for (int w = 0; w < workers; ++w) {
      trained.replicas.push_back(ReadSafetensors(
          absl::StrCat(replicas, "/worker-", w, ".safetensors")));
    }
  }
  return trained;
}

void ExpectReplicasIdentical(const Trained& run) {
  ASSERT_FALSE(run.replicas.empty());
  for (size_t w = 0; w < run.replicas.size(); ++w) {
    ASSERT_EQ(run.replicas[w].size(), run.exported.size()) << "worker " << w;
    // Bit for bit: == on every float, and the checkpoint is worker 0's.
    EXPECT_TRUE(run.replicas[w] == run.replicas[0]) << "worker " << w;
  }
  EXPECT_TRUE(run.replicas[0] == run.exported);
}

TEST(CollectiveEquivalence, TwoAndThreeWorkersEqualTheSyncPsRun) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  // The mlp's Dropout draws its masks per worker (DeviceBackendOptions::
  // replica), so each collective run is compared with a ps run of as many
  // workers.
  const Trained ps = Train("ps-2x48", 1, 2, 48, "sgd");
  const Trained ps3 = Train("ps-3x32", 2, 3, 32, "sgd");
  const Trained two = Train("collective-2x48", 0, 2, 48, "sgd");
  const Trained three = Train("collective-3x32", 0, 3, 32, "sgd");
  ASSERT_EQ(ps.exported.size(), 3u);  // the mlp: dense/kernel, dense_1/*
  ASSERT_EQ(two.exported.size(), 3u);
  ASSERT_EQ(three.exported.size(), 3u);
  const double two_vs_ps = LargestDifference(ps.exported, two.exported);
  const double three_vs_ps = LargestDifference(ps3.exported, three.exported);
  std::printf("largest difference to the ps run: 2 workers %g, 3 workers %g\n",
              two_vs_ps, three_vs_ps);
  EXPECT_LE(two_vs_ps, 1e-5);
  EXPECT_LE(three_vs_ps, 1e-5);
  ExpectReplicasIdentical(two);
  ExpectReplicasIdentical(three);
  // The comparison can tell runs apart: another global batch (2 x 32)
  // trains to visibly different values.
  const Trained other = Train("collective-2x32", 0, 2, 32, "sgd");
  const double other_vs_ps = LargestDifference(ps.exported, other.exported);
  std::printf("another global batch: %g\n", other_vs_ps);
  EXPECT_GT(other_vs_ps, 1e-3);
}

TEST(CollectiveEquivalence, AdamSlotsStayInStep) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  // Adam's moments and step count live in each replica: two collective
  // workers equal the ps run with Adam too.
  const Trained ps = Train("ps-adam", 1, 2, 48, "adam");
  const Trained two = Train("collective-adam", 0, 2, 48, "adam");
  ASSERT_FALSE(ps.exported.empty());
  const double difference = LargestDifference(ps.exported, two.exported);
  std::printf("adam: largest difference to the ps run %g\n", difference);
  EXPECT_LE(difference, 1e-5);
  ExpectReplicasIdentical(two);
}

TEST(CollectiveEquivalence, Bf16AllReduceKeepsReplicasIdenticalAndClose) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  // bf16 payloads round every sum to 8 significant bits: the run drifts
  // from the float32 one, a little, and the replicas still agree bit for
  // bit (each segment's sum is rounded once, by its owner, and sent as is).
  const Trained fp32 = Train("collective-fp32", 0, 2, 48, "sgd");
  const Trained bf16 = Train("collective-bf16", 0, 2, 48, "sgd", "bf16");
  ExpectReplicasIdentical(bf16);
  const double difference = LargestDifference(fp32.exported, bf16.exported);
  std::printf("bf16 vs float32 all-reduce after 50 steps: %g\n", difference);
  EXPECT_GT(difference, 0);
  EXPECT_LT(difference, 1e-2);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
