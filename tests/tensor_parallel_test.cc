// Tensor model parallelism in real processes: the seed 000 MLP with the
// chief's --mesh and --layout_map (d1 column-parallel, d2 replicated),
// each model-parallel group's members exchanging activations over their
// gRPC ring and pushing to the ps, trains what one process trains with the
// same global batch, at data:1,model:2 (2 workers), data:2,model:2 (4) and
// data:4,model:1 (4). SGD, 50 steps, dropout included; the final
// checkpoints are compared through `chief --export_safetensors`. The same
// for the Transformer encoder examples/transformer_tp.keras3.json with its
// layout map (embedding split by vocabulary, attention by heads, the MLP
// column- then row-parallel, dropout after the attention and in the MLP) on
// token ids from a CSV. Processes on 127.0.0.1, ports picked at run time.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <functional>
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

// The issue's (and the README's) layout: d1 column-parallel, d2 replicated.
constexpr char kLayout[] =
    R"({"d1/kernel": [null, "model"], "d1/bias": ["model"]})";

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

struct Mesh {
  int data, model;
};

// Trains one process with the global batch `global` and each of `meshes`
// with the same global batch (`train(name, workers, batch per group, mesh
// flags)`), and expects each mesh's weights within 1e-5 of the process's;
// and, so that the comparison can tell runs apart, one process with half
// the global batch more than 1e-3 away.
void ExpectMeshesTrainWhatOneProcessTrains(
    const std::string& what, int global, const std::string& layout,
    const std::vector<Mesh>& meshes,
    const std::function<Variables(const std::string&, int, int,
                                  const std::vector<std::string>&)>& train) {
  const Variables one = train(what + "-1", 1, global, {});
  const Variables half = train(what + "-1-half", 1, global / 2, {});
  ASSERT_FALSE(one.empty());
  EXPECT_GT(LargestDifference(one, half), 1e-3);
  for (const Mesh& mesh : meshes) {
    const std::string shape =
        absl::StrCat("data:", mesh.data, ",model:", mesh.model);
    const Variables got =
        train(absl::StrCat(what, "-", mesh.data, "x", mesh.model),
              mesh.data * mesh.model, global / mesh.data,
              {"--mesh=" + shape, "--layout_map=" + layout});
    ASSERT_EQ(got.size(), one.size()) << shape;
    const double difference = LargestDifference(one, got);
    std::printf("%s: largest difference, %s vs one process: %g\n", what.c_str(),
                shape.c_str(), difference);
    std::string far;
    for (const auto& [name, values] : one) {
      const double d =
          LargestDifference({{name, values}}, {{name, got.at(name)}});
      if (d > 1e-5) absl::StrAppend(&far, " ", name, " ", d);
    }
    EXPECT_LE(difference, 1e-5) << shape << ":" << far;
  }
}

TEST(TensorParallel, MeshRunsEqualOneProcessWithTheGlobalBatch) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string layout = TempPath("layout.json");
  ASSERT_TRUE(WriteFile(layout, kLayout));
  ExpectMeshesTrainWhatOneProcessTrains(
      "mlp", 96, layout, {{1, 2}, {2, 2}, {4, 1}},
      [](const std::string& name, int workers, int batch,
         const std::vector<std::string>& mesh) {
        return Train(name, workers, batch, mesh);
      });
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

TEST(TensorParallel, TransformerMeshRunsEqualOneProcessWithTheGlobalBatch) {
  const std::string data_dir = TempPath("tokens");
  ASSERT_EQ(mkdir(data_dir.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(data_dir + "/train.csv", TokenCsv(4096, 1)));
  ASSERT_TRUE(WriteFile(data_dir + "/test.csv", TokenCsv(256, 2)));
  const std::string layout = RunfilePath("examples/transformer_tp.layout.json");
  auto train = [&](const std::string& name, int workers, int batch,
                   const std::vector<std::string>& mesh) {
    const std::string model_dir = TempPath(name + "-model");
    std::vector<std::string> chief_flags = {
        "--model=" + RunfilePath("examples/transformer_tp.keras3.json"),
        "--data_dir=" + data_dir,
        "--optimizer=sgd",
        "--learning_rate=0.05",
        "--steps=50",
        absl::StrCat("--batch_size=", batch),
        "--threads=1",
        "--model_dir=" + model_dir};
    chief_flags.insert(chief_flags.end(), mesh.begin(), mesh.end());
    LocalCluster(/*num_ps=*/1, workers)
        .Run(name, chief_flags, {"--data_dir=" + data_dir, "--threads=1"});
    return ReadSafetensors(ExportSafetensors(model_dir, name));
  };
  ExpectMeshesTrainWhatOneProcessTrains(
      "transformer", 32, RunfilePath("examples/transformer_tp.layout.json"),
      {{1, 2}, {2, 2}, {4, 1}}, train);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
