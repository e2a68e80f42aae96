#include "chief/run_setup.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/tf_config.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  ASSERT_TRUE(WriteFileAtomically(path, text).ok()) << path;
}

// A Keras model on 2 features with a 2-class softmax output after
// `first_layers` (Keras layers' JSON, each followed by a comma).
std::string WriteModel(const std::string& name,
                       const std::string& first_layers) {
  const std::string path = absl::StrCat(TestDir("models"), "/", name);
  Write(path, absl::StrCat(
                  R"({"class_name": "Sequential", "config": {"name": "m",
        "layers": [{"class_name": "InputLayer", "config": {"name": "in",
        "batch_input_shape": [null, 2]}},)",
                  first_layers,
                  R"({"class_name": "Dense", "config": {"name": "out",
        "units": 2, "activation": "softmax"}}]}})"));
  return path;
}

// train.csv with `n` lines and test.csv with n / 2, "x0,x1,label".
std::string WriteData(int n) {
  const std::string dir = TestDir(absl::StrCat("data", n));
  std::string train, test;
  for (int i = 0; i < n; ++i) {
    const std::string line =
        absl::StrCat(i % 7 * 0.1, ",", i % 5 * -0.2, ",", i % 2, "\n");
    train += line;
    if (i < n / 2) test += line;
  }
  Write(dir + "/train.csv", train);
  Write(dir + "/test.csv", test);
  return dir;
}

ClusterSpec Cluster(int ps, int workers) {
  std::string json = R"({"cluster": {"chief": ["127.0.0.1:1000"])";
  int port = 2000;
  for (const auto& [job, n] : {std::make_pair("ps", ps),
                               std::make_pair("worker", workers)}) {
    if (n == 0) continue;
    absl::StrAppend(&json, ", \"", job, "\": [");
    for (int i = 0; i < n; ++i) {
      absl::StrAppend(&json, i ? ", " : "", "\"127.0.0.1:", port++,
                      "\"");
    }
    absl::StrAppend(&json, "]");
  }
  absl::StrAppend(&json, R"(}, "task": {"type": "chief", "index": 0}})");
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  EXPECT_TRUE(config.ok()) << config.status();
  return config->cluster;
}

class RunSetupTest : public ::testing::Test {
 protected:
  RunSetupTest() {
    settings_.model = WriteModel("mlp.json", R"({"class_name": "Dense",
        "config": {"name": "hidden", "units": 4, "activation": "relu"}},)");
    settings_.data_dir = WriteData(256);
    settings_.batch_size = 32;
  }

  // SetUpRun's error message, "" if it succeeded.
  std::string Refusal(const ClusterSpec& cluster) {
    return std::string(SetUpRun(settings_, cluster).status().message());
  }

  RunSettings settings_;
};

TEST_F(RunSetupTest, APsRunCarriesTheSettingsIntoItsConfig) {
  settings_.optimizer.name = "sgd";
  settings_.step_timeout_seconds = 7;
  settings_.epochs = 3;
  settings_.seed = 9;
  absl::StatusOr<RunSetup> run = SetUpRun(settings_, Cluster(2, 2));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->collective);
  const TrainingConfig& config = run->config;
  EXPECT_EQ(config.model_name(), settings_.model);
  EXPECT_EQ(config.seed(), 9u);
  EXPECT_EQ(config.batch_size_per_worker(), 32);
  EXPECT_EQ(config.epochs(), 3);
  EXPECT_TRUE(config.optimizer().has_sgd());
  EXPECT_EQ(config.precision(), "fp32");
  EXPECT_EQ(config.loss().kind(), LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
  EXPECT_EQ(config.update().mode(), UpdateConfig::SYNC);
  EXPECT_EQ(config.update().num_workers(), 2);
  EXPECT_EQ(config.update().step_timeout_ms(), 7000);
  // hidden/kernel, hidden/bias, out/kernel, out/bias.
  EXPECT_EQ(config.variables_size(), 4);
  EXPECT_EQ(run->spec.variables.size(), 4u);
  EXPECT_EQ(run->placement.num_ps(), 2);
  EXPECT_EQ(run->train.size(), 256);
  EXPECT_EQ(run->test.size(), 128);
  // 256 examples, 2 workers x 32 a step.
  EXPECT_EQ(run->length.steps_per_epoch, 4);
  EXPECT_EQ(run->length.total_steps, 12);
}

TEST_F(RunSetupTest, AClusterWithoutPsIsCollectiveLaidOutAsOnePsTask) {
  absl::StatusOr<RunSetup> run = SetUpRun(settings_, Cluster(0, 3));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->collective);
  EXPECT_EQ(run->placement.num_ps(), 1);
  for (const VariablePlacement& v : run->placement.variables()) {
    for (const VariablePlacement::Slice& slice : v.slices()) {
      EXPECT_EQ(slice.ps_task(), 0) << v.name();
    }
  }
  settings_.allreduce_dtype = "bf16";
  run = SetUpRun(settings_, Cluster(0, 3));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->config.allreduce_dtype(), "bf16");
}

TEST_F(RunSetupTest, ACollectiveRunRefusesWhatNeedsPsTasks) {
  const ClusterSpec cluster = Cluster(0, 2);
  const std::string why =
      " (TF_CONFIG has no \"ps\" job: a collective run, where every step "
      "all-reduces every worker's gradient)";
  settings_.mode = "async";
  EXPECT_EQ(Refusal(cluster), "--mode: async needs ps tasks; use sync" + why);
  settings_.mode = "sync";
  settings_.replicas_to_aggregate = 1;
  EXPECT_EQ(Refusal(cluster), "--replicas_to_aggregate: needs ps tasks" + why);
  settings_.replicas_to_aggregate = 0;
  settings_.on_worker_failure = "continue";
  EXPECT_EQ(Refusal(cluster),
            "--on_worker_failure: continue needs ps tasks; use wait" + why);
  settings_.on_worker_failure = "wait";
  settings_.model = WriteModel("embedding.json", R"(
      {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 10,
       "output_dim": 3}},
      {"class_name": "Flatten", "config": {"name": "flat"}},)");
  EXPECT_EQ(Refusal(cluster),
            "TF_CONFIG: no \"ps\" job (a collective run), but the model's "
            "'emb/embeddings' is an embedding table, which only ps tasks "
            "hold; add a \"ps\" job");
  settings_.strategy = "parameter_server";
  EXPECT_NE(Refusal(cluster).find("--strategy"), std::string::npos)
      << Refusal(cluster);
}

TEST_F(RunSetupTest, RefusesSettingsThatDoNotFitTheCluster) {
  EXPECT_EQ(Refusal(Cluster(1, 0)),
            "TF_CONFIG: cluster: a run needs at least one \"worker\" task");
  settings_.replicas_to_aggregate = 3;
  EXPECT_EQ(Refusal(Cluster(1, 2)),
            "--replicas_to_aggregate: 3 must be in [0, 2] (TF_CONFIG's "
            "workers)");
  settings_.replicas_to_aggregate = 0;
  settings_.allreduce_dtype = "bf16";
  EXPECT_EQ(Refusal(Cluster(1, 2)),
            "--allreduce_dtype: bf16 applies to collective runs only "
            "(TF_CONFIG has a \"ps\" job: the workers push float32 gradients "
            "to the ps tasks)");
}

TEST_F(RunSetupTest, RefusesModelsAndDataThatCannotBeRead) {
  const ClusterSpec cluster = Cluster(1, 1);
  RunSettings settings = settings_;
  settings_.model = "/nonexistent/model.json";
  EXPECT_EQ(Refusal(cluster).rfind("--model: ", 0), 0u) << Refusal(cluster);
  settings_ = settings;
  settings_.data_dir = TestDir("empty");
  EXPECT_EQ(Refusal(cluster).rfind("--data_dir: ", 0), 0u) << Refusal(cluster);
  settings_.data_format = "criteo";
  EXPECT_EQ(Refusal(cluster).rfind("--data_dir: ", 0), 0u) << Refusal(cluster);
  // Three classes in the data, two in the model's softmax.
  settings_ = settings;
  settings_.data_dir = TestDir("three-classes");
  Write(settings_.data_dir + "/train.csv", "0,0,0\n1,1,1\n2,2,2\n");
  Write(settings_.data_dir + "/test.csv", "0,0,0\n");
  EXPECT_NE(Refusal(cluster).find("the training data"), std::string::npos)
      << Refusal(cluster);
}

TEST(CheckRunSettings, NamesTheFlagOfEachBadChoice) {
  const auto refusal = [](void (*change)(RunSettings*)) {
    RunSettings settings;
    change(&settings);
    return std::string(CheckRunSettings(settings).message());
  };
  EXPECT_EQ(refusal([](RunSettings* s) {}), "");
  EXPECT_EQ(refusal([](RunSettings* s) { s->data_format = "parquet"; }),
            "--data_format: \"parquet\" must be empty or criteo");
  EXPECT_EQ(refusal([](RunSettings* s) { s->bad_lines = "ignore"; }),
            "--bad_lines: \"ignore\" must be refuse or skip");
  EXPECT_EQ(refusal([](RunSettings* s) { s->allreduce_dtype = "fp16"; }),
            "--allreduce_dtype: \"fp16\" must be float32 or bf16");
  EXPECT_EQ(refusal([](RunSettings* s) { s->precision = "fp16"; }),
            "--precision: \"fp16\" must be fp32 or bf16");
  EXPECT_EQ(refusal([](RunSettings* s) { s->step_timeout_seconds = 0; }),
            "--step_timeout_seconds: 0 must be in [1, 1000000]");
  EXPECT_EQ(refusal([](RunSettings* s) { s->max_staleness = 3; }),
            "--max_staleness: applies to --mode=async only");
  EXPECT_EQ(refusal([](RunSettings* s) {
              s->mode = "async";
              s->replicas_to_aggregate = 1;
            }),
            "--replicas_to_aggregate: applies to --mode=sync only");
  EXPECT_EQ(refusal([](RunSettings* s) { s->embedding.min_count = 0; }),
            "--embedding_min_count: 0 must be >= 1");
  EXPECT_EQ(refusal([](RunSettings* s) { s->optimizer.beta_2 = 1; }),
            "--beta_2: 1 must be in [0, 1)");
}

TEST_F(RunSetupTest, AMeshIsCheckedAndCarriedAndItsGroupsMakeTheGlobalBatch) {
  const std::string layout = TestDir("layouts") + "/split.json";
  const std::string text =
      R"({"hidden/kernel": [null, "model"], "hidden/bias": ["model"],
          "out/kernel": ["model", null]})";
  Write(layout, text);
  settings_.mesh = "data:2,model:2";
  settings_.layout_map = layout;
  absl::StatusOr<RunSetup> run = SetUpRun(settings_, Cluster(1, 4));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->config.mesh(), "data:2,model:2");
  EXPECT_EQ(run->config.layout_map(), text);
  // Two groups of 32 make a step's 64 examples: 256 / 64 steps an epoch.
  EXPECT_EQ(run->length.steps_per_epoch, 4);
}

TEST_F(RunSetupTest, AMeshTheWorkersCannotRunIsRefusedBeforeTheRun) {
  const std::string layout = TestDir("layouts") + "/odd.json";
  Write(layout, R"({"hidden/kernel": [null, "model"]})");
  settings_.layout_map = layout;
  settings_.mesh = "data:1,model:2";
  EXPECT_NE(Refusal(Cluster(1, 2))
                .find("kernel 'hidden/kernel' is split on its output dimension "
                      "(column-parallel), so bias 'hidden/bias' must be split"),
            std::string::npos)
      << Refusal(Cluster(1, 2));
  settings_.mesh = "data:2,model:2";
  EXPECT_NE(Refusal(Cluster(1, 2))
                .find("--mesh=data:2,model:2: data x model "
                      "= 2 x 2 = 4, but the run has 2"),
            std::string::npos)
      << Refusal(Cluster(1, 2));
  Write(layout, R"({"hidden/kernel": [null, "model"],
                    "hidden/bias": ["model"]})");
  settings_.mesh = "model:2";
  settings_.mode = "async";
  EXPECT_NE(Refusal(Cluster(1, 2))
                .find("model-parallel groups need "
                      "--mode=sync"),
            std::string::npos)
      << Refusal(Cluster(1, 2));
  settings_.mode = "sync";
  EXPECT_NE(Refusal(Cluster(0, 2))
                .find("model-parallel groups run with ps "
                      "tasks only"),
            std::string::npos)
      << Refusal(Cluster(0, 2));
  settings_.layout_map = TestDir("layouts") + "/missing.json";
  EXPECT_NE(Refusal(Cluster(1, 2)).find("layout_map: --layout_map="),
            std::string::npos);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
