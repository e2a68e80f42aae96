// Tensor model parallelism in real processes: the seed 000 MLP with the
// chief's --mesh and --layout_map (d1 column-parallel, d2 row-parallel),
// each model-parallel group's members exchanging activations over their
// gRPC ring and pushing to the ps, trains what data-parallel runs of the
// same global batch train: data:1,model:2 (2 workers) what 1 worker trains,
// data:2,model:2 (4 workers) what 2 workers train. SGD, 50 steps, dropout
// included; the final checkpoints are compared through
// `chief --export_safetensors`. The same for the Transformer encoder
// examples/transformer_tp.keras3.json with its layout map (embedding split
// by vocabulary, attention by heads, the MLP column- then row-parallel,
// dropout after the attention and in the MLP) on token ids from a CSV, at
// data:1,model:2.
// Processes on 127.0.0.1, ports picked at run time.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
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

constexpr char kLayout[] =
    R"({"d1/kernel": [null, "model"], "d1/bias": ["model"],
        "d2/kernel": ["model", null]})";

Variables Train(const std::string& name, int workers, int batch,
                const std::vector<std::string>& extra_chief_flags = {}) {
  const std::string model_dir = TempPath(name + "-model");
  std::vector<std::string> chief_flags = {
      "--model=" + RunfilePath("examples/seed000_mlp.keras3.json"),
      "--optimizer=sgd",
      "--learning_rate=0.05",
      "--steps=50",
      absl::StrCat("--batch_size=", batch),
      "--model_dir=" + model_dir};
  chief_flags.insert(chief_flags.end(), extra_chief_flags.begin(),
                     extra_chief_flags.end());
  LocalCluster(/*num_ps=*/1, workers).Run(name, chief_flags);
  return ReadSafetensors(ExportSafetensors(model_dir, name));
}

TEST(TensorParallel, MeshRunsEqualDataParallelRunsOfTheSameGlobalBatch) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string layout = TempPath("layout.json");
  ASSERT_TRUE(WriteFile(layout, kLayout));
  const std::vector<std::string> mesh12 = {"--mesh=data:1,model:2",
                                           "--layout_map=" + layout};
  const std::vector<std::string> mesh22 = {"--mesh=data:2,model:2",
                                           "--layout_map=" + layout};
  const Variables one = Train("dp-1x48", 1, 48);
  const Variables model2 = Train("tp-1x2", 2, 48, mesh12);
  const Variables two = Train("dp-2x48", 2, 48);
  const Variables groups2 = Train("tp-2x2", 4, 48, mesh22);
  ASSERT_EQ(one.size(), 3u);  // d1/kernel, d2/kernel, d2/bias
  ASSERT_EQ(model2.size(), 3u);
  const double model2_vs_one = LargestDifference(one, model2);
  const double groups2_vs_two = LargestDifference(two, groups2);
  std::printf(
      "largest difference: data:1,model:2 vs 1 worker %g; data:2,model:2 vs "
      "2 workers %g\n",
      model2_vs_one, groups2_vs_two);
  EXPECT_LE(model2_vs_one, 1e-5);
  EXPECT_LE(groups2_vs_two, 1e-5);
  // The comparison can tell runs apart: the global batches 48 and 96 train
  // to visibly different values.
  EXPECT_GT(LargestDifference(one, two), 1e-3);
}

// `n` lines of 8 token ids in [0, 256) and a label in [0, 10) that is a
// function of them.
std::string TokenCsv(int n, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> id(0, 255);
  std::string csv;
  for (int i = 0; i < n; ++i) {
    int sum = 0;
    for (int t = 0; t < 8; ++t) {
      const int token = id(random);
      sum += token;
      absl::StrAppend(&csv, token, ",");
    }
    absl::StrAppend(&csv, sum % 10, "\n");
  }
  return csv;
}

TEST(TensorParallel, TransformerAtModel2EqualsOneWorker) {
  const std::string data_dir = TempPath("tokens");
  ASSERT_EQ(mkdir(data_dir.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(data_dir + "/train.csv", TokenCsv(4096, 1)));
  ASSERT_TRUE(WriteFile(data_dir + "/test.csv", TokenCsv(256, 2)));
  const std::string layout = RunfilePath("examples/transformer_tp.layout.json");
  auto train = [&](const std::string& name, int workers,
                   std::vector<std::string> mesh) {
    const std::string model_dir = TempPath(name + "-model");
    std::vector<std::string> chief_flags = {
        "--model=" + RunfilePath("examples/transformer_tp.keras3.json"),
        "--data_dir=" + data_dir,
        "--optimizer=sgd",
        "--learning_rate=0.05",
        "--steps=50",
        "--batch_size=16",
        "--threads=1",
        "--model_dir=" + model_dir};
    chief_flags.insert(chief_flags.end(), mesh.begin(), mesh.end());
    LocalCluster(/*num_ps=*/1, workers)
        .Run(name, chief_flags, {"--data_dir=" + data_dir, "--threads=1"});
    return ReadSafetensors(ExportSafetensors(model_dir, name));
  };
  // Only data:1,model:2: with 4 workers (data:2,model:2 against 2 plain
  // workers) some runs end exactly 2.877e-4 away, apparently as the ps sums
  // a step's 4 pushes in their order of arrival and one rounding flips a
  // ReLU (see the session note of 2026-11-26); that would make this test
  // flaky. The MLP above runs data:2,model:2.
  const Variables one = train("tf-dp-1", 1, {});
  const Variables model2 = train(
      "tf-tp-1x2", 2, {"--mesh=data:1,model:2", "--layout_map=" + layout});
  const Variables two = train("tf-dp-2", 2, {});
  ASSERT_EQ(one.size(), 19u);  // every variable of the model
  ASSERT_EQ(model2.size(), one.size());
  const double model2_vs_one = LargestDifference(one, model2);
  std::printf(
      "transformer: largest difference: data:1,model:2 vs 1 worker %g\n",
      model2_vs_one);
  EXPECT_LE(model2_vs_one, 1e-5);
  EXPECT_GT(LargestDifference(one, two), 1e-3);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
