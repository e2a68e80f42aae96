// Criteo-format data trains a model with a growing embedding table end to
// end (--data_format=criteo, --dynamic_embeddings): workers stream their
// lines, remap the batch's 64-bit ids (all far above 2^31) to local rows,
// pull and push only those rows by id; the chief evaluates on the test
// file streamed and reports AUC, log loss and calibration, or an evaluator
// task does it from each epoch's checkpoint; with --on_worker_failure=
// continue a killed worker's lines are trained by the other. Real processes
// on 127.0.0.1.
#include <signal.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "data/criteo_hash.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr int kValues = 40;  // Distinct values of C1.

// Inputs "dense" [13] and "sparse" [26]; Embedding "embedding" (input_dim
// 1000, made growing by --dynamic_embeddings) on the ids, Flatten, joined
// with the dense features, Dense(1, sigmoid). tf.keras 2.x Functional form.
std::string ModelJson() {
  using Json = nlohmann::json;
  const auto node = [](std::vector<std::string> sources) {
    Json call = Json::array();
    for (const std::string& s : sources) {
      call.push_back({s, 0, 0, Json::object()});
    }
    return Json::array({call});
  };
  const auto input = [](const std::string& name, int n) {
    return Json{
        {"class_name", "InputLayer"},
        {"name", name},
        {"config", {{"name", name}, {"batch_input_shape", {nullptr, n}}}},
        {"inbound_nodes", Json::array()}};
  };
  const auto layer = [&](const std::string& cls, Json config,
                         std::vector<std::string> reads) {
    const std::string name = config["name"];
    return Json{{"class_name", cls},
                {"name", name},
                {"config", config},
                {"inbound_nodes", node(reads)}};
  };
  Json layers = Json::array(
      {input("dense", 13), input("sparse", 26),
       layer("Embedding",
             {{"name", "embedding"}, {"input_dim", 1000}, {"output_dim", 4}},
             {"sparse"}),
       layer("Flatten", {{"name", "flatten"}}, {"embedding"}),
       layer("Concatenate", {{"name", "concatenate"}, {"axis", -1}},
             {"dense", "flatten"}),
       layer("Dense",
             {{"name", "click"}, {"units", 1}, {"activation", "sigmoid"}},
             {"concatenate"})});
  Json model = {{"class_name", "Model"},
                {"config",
                 {{"name", "ctr"},
                  {"layers", layers},
                  {"input_layers", {{"dense", 0, 0}, {"sparse", 0, 0}}},
                  {"output_layers", {{"click", 0, 0}}}}}};
  return model.dump();
}

// `n` Criteo lines: C1 one of kValues values (hex), the label its parity
// (so the model must learn each id's row); I1 noise; C2 a value of its
// own per line (ids seen once); the rest empty.
std::string Lines(int n, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> value(0, kValues - 1);
  std::string text;
  for (int i = 0; i < n; ++i) {
    const int v = value(random);
    std::vector<std::string> columns(40);
    columns[0] = absl::StrCat(v % 2);
    columns[1] = absl::StrCat(random() % 100);
    columns[14] = absl::StrCat(absl::Hex(0x1000 + v));
    columns[15] = absl::StrCat(absl::Hex(random()));
    absl::StrAppend(&text, absl::StrJoin(columns, "\t"), "\n");
  }
  return text;
}

TEST(Criteo, TrainsAGrowingTableOn64BitIdsWithTwoPsAndTwoWorkers) {
  // The premise: every id the model sees is far above 2^31.
  for (int v = 0; v < kValues; ++v) {
    ASSERT_GT(data::CriteoSparseId(1, 0x1000 + v), uint64_t{1} << 32) << v;
  }
  const std::string data_dir = TempPath("criteo-data");
  mkdir(data_dir.c_str(), 0755);
  // 2050 lines, one malformed (skipped, under --bad_lines=skip), so that
  // batch 32 x 2 workers makes 32 steps an epoch with lines to spare.
  std::string train = Lines(2049, 1);
  size_t line_33 = 0;
  for (int line = 0; line < 33; ++line) line_33 = train.find('\n', line_33) + 1;
  train.insert(line_33, "not\ta\tcriteo\tline\n");
  ASSERT_TRUE(WriteFile(data_dir + "/train.tsv", train));
  ASSERT_TRUE(WriteFile(data_dir + "/test.tsv", Lines(600, 2)));
  const std::string model = TempPath("criteo-model.json");
  ASSERT_TRUE(WriteFile(model, ModelJson()));
  const std::string model_dir = TempPath("criteo-run");
  const std::string log = LocalCluster(2, 2).Run(
      "criteo",
      {"--model=" + model, "--data_dir=" + data_dir, "--data_format=criteo",
       "--bad_lines=skip", "--dynamic_embeddings=embedding", "--mode=sync",
       "--optimizer=adam", "--learning_rate=0.02", "--batch_size=32",
       "--epochs=3", "--threads=1", "--model_dir=" + model_dir},
      {"--data_dir=" + data_dir, "--threads=1"});
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  std::printf("%s\n", summary.dump(2).c_str());
  EXPECT_EQ(summary["global_step"].get<int64_t>(), 3 * 32) << log;
  // The label is a function of C1's id: learnt, on ids the worker remapped.
  ASSERT_TRUE(summary["test_auc"].is_number()) << summary.dump(2);
  EXPECT_GE(summary["test_auc"].get<double>(), 0.95);
  ASSERT_TRUE(summary["test_logloss"].is_number()) << summary.dump(2);
  EXPECT_LT(summary["test_logloss"].get<double>(), 0.3);
  // Equal to the binary cross-entropy (the output is a sigmoid's).
  EXPECT_NEAR(summary["test_logloss"].get<double>(),
              summary["test_loss"].get<double>(), 1e-4);
  ASSERT_TRUE(summary["test_calibration"].is_number()) << summary.dump(2);
  EXPECT_NEAR(summary["test_calibration"].get<double>(), 1.0, 0.2);
  // The malformed line belongs to worker 1 (line 33, in its first block of
  // 32): skipped and reported.
  EXPECT_NE(ReadFile(TempPath("criteo-worker1.log"))
                .find("skipped 1 malformed lines"),
            std::string::npos);
}

// TF_CONFIG with an evaluator task (TensorFlow's sidecar evaluator): the
// evaluator streams the test file itself, reading the growing table's rows
// from each epoch's checkpoint, and the chief records its AUC per epoch.
// The files are named as a download's days (--train_files, --test_files):
// every task reads the ones the chief's patterns name (a worker finds no
// training file by the default names, so it learns the names from the
// chief), and none reads test.tsv, which holds no Criteo line.
TEST(Criteo, AnEvaluatorTaskEvaluatesEachEpochOnTheTestFiles) {
  const std::string data_dir = TempPath("eval-data");
  mkdir(data_dir.c_str(), 0755);
  const std::string train = Lines(2048, 3);
  const size_t half = train.find('\n', train.size() / 2) + 1;
  ASSERT_TRUE(WriteFile(data_dir + "/day_9", train.substr(0, half)));
  ASSERT_TRUE(WriteFile(data_dir + "/day_10", train.substr(half)));
  ASSERT_TRUE(WriteFile(data_dir + "/day_11", Lines(600, 4)));
  ASSERT_TRUE(WriteFile(data_dir + "/test.tsv", "not a criteo line\n"));
  const std::string model = TempPath("eval-model.json");
  ASSERT_TRUE(WriteFile(model, ModelJson()));
  const std::string model_dir = TempPath("eval-run");
  LocalCluster cluster(1, 2);
  cluster.AddEvaluator();
  std::vector<Subprocess> tasks;
  tasks.push_back(cluster.Start("eval", "ps", 0, {"--model_dir=" + model_dir}));
  for (int i = 0; i < 2; ++i) {
    tasks.push_back(cluster.Start("eval", "worker", i,
                                  {"--data_dir=" + data_dir, "--threads=1"}));
  }
  Subprocess evaluator = cluster.Start(
      "eval", "evaluator", 0,
      {"--data_dir=" + data_dir, "--model_dir=" + model_dir, "--threads=1"});
  // 2048 lines / (2 workers x 32) = 32 steps an epoch.
  Subprocess chief = cluster.Start(
      "eval", "chief", 0,
      {"--model=" + model, "--data_dir=" + data_dir, "--data_format=criteo",
       "--train_files=day_?,day_10", "--test_files=day_1[1-9]",
       "--dynamic_embeddings=embedding", "--mode=sync", "--optimizer=adam",
       "--learning_rate=0.02", "--batch_size=32", "--epochs=3", "--threads=1",
       "--model_dir=" + model_dir});
  ASSERT_EQ(chief.Wait(300), 0) << Log(chief);
  EXPECT_EQ(evaluator.Wait(60), 0) << Log(evaluator);
  for (Subprocess& task : tasks) EXPECT_EQ(task.Wait(60), 0) << Log(task);

  const std::string log = Log(chief);
  EXPECT_NE(log.find("(the evaluator evaluates the checkpoint)"),
            std::string::npos)
      << log;
  for (int step : {32, 64, 96}) {
    EXPECT_NE(Log(evaluator).find(absl::StrCat("(step ", step, "): test_loss")),
              std::string::npos)
        << Log(evaluator);
  }
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  std::printf("%s\n", summary.dump(2).c_str());
  EXPECT_EQ(summary["global_step"].get<int64_t>(), 3 * 32);
  // An AUC for each epoch, the evaluator's: the label is a function of C1's
  // id, learnt by the end.
  const nlohmann::json& auc = summary["history"]["val_auc"];
  ASSERT_TRUE(auc.is_array() && auc.size() == 3) << summary.dump(2);
  for (const nlohmann::json& value : auc) {
    ASSERT_TRUE(value.is_number()) << summary.dump(2);
  }
  EXPECT_GE(auc[2].get<double>(), 0.95) << summary.dump(2);
  EXPECT_EQ(summary["test_auc"].get<double>(), auc[2].get<double>());
}

// --on_worker_failure=continue on streamed data: worker 1 is SIGKILLed
// mid-run and never comes back; worker 0 reads worker 1's share of the
// lines from where it was (a second stream of the files) and trains it
// besides its own. Every global batch is applied exactly once on the ps
// (--count_batches), and the model still learns the labels.
TEST(Criteo, WithContinueAKilledWorkersShareOfTheLinesIsTrainedByTheOther) {
  const std::string data_dir = TempPath("cover-data");
  mkdir(data_dir.c_str(), 0755);
  // Line 2047, in worker 1's share of the last step of each epoch, is
  // malformed (skipped under --bad_lines=skip): whoever reads worker 1's
  // lines logs it.
  std::string train = Lines(2048, 5);
  train.insert(train.rfind('\n', train.size() - 2) + 1,
               "not\ta\tcriteo\tline\n");
  ASSERT_TRUE(WriteFile(data_dir + "/train.tsv", train));
  ASSERT_TRUE(WriteFile(data_dir + "/test.tsv", Lines(600, 6)));
  const std::string model = TempPath("cover-model.json");
  ASSERT_TRUE(WriteFile(model, ModelJson()));
  const std::string model_dir = TempPath("cover-run");
  const std::string ledger = TempPath("cover-ledger.txt");
  std::remove(ledger.c_str());
  LocalCluster cluster(1, 2);
  Subprocess ps =
      cluster.Start("cover", "ps", 0,
                    {"--model_dir=" + model_dir, "--count_batches=" + ledger});
  std::vector<Subprocess> workers;
  for (int i = 0; i < 2; ++i) {
    // Pushes slowed down so that the kill comes well before the end.
    workers.push_back(cluster.Start(
        "cover", "worker", i,
        {"--data_dir=" + data_dir, "--threads=1", "--push_delay_ms=40"}));
  }
  // 2048 lines / (2 workers x 32) = 32 steps an epoch; 3 epochs.
  Subprocess chief = cluster.Start(
      "cover", "chief", 0,
      {"--model=" + model, "--data_dir=" + data_dir, "--data_format=criteo",
       "--dynamic_embeddings=embedding", "--mode=sync", "--optimizer=adam",
       "--learning_rate=0.02", "--batch_size=32", "--epochs=3", "--threads=1",
       "--bad_lines=skip", "--print_every_steps=2", "--failure_timeout=2s",
       "--on_worker_failure=continue", "--model_dir=" + model_dir});
  const absl::Time deadline = absl::Now() + absl::Seconds(300);
  const auto chief_said = [&](const std::string& text) {
    return Log(chief).find(text) != std::string::npos;
  };
  while (!chief_said("step 12/96") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(chief_said("step 12/96")) << Log(chief);
  EXPECT_EQ(workers[1].Stop(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(chief.Wait(300), 0) << Log(chief);
  EXPECT_EQ(workers[0].Wait(60), 0) << Log(workers[0]);
  EXPECT_EQ(ps.Wait(60), 0) << Log(ps);
  const std::string log = Log(chief);
  EXPECT_NE(log.find("chief: going on without worker 1 from step "),
            std::string::npos)
      << log;
  // Worker 0 read worker 1's lines: its malformed line of epochs 0 and 1.
  for (int epoch : {1, 2}) {
    EXPECT_NE(Log(workers[0])
                  .find(absl::StrCat("worker 1: epoch ", epoch,
                                     ": skipped 1 malformed lines")),
              std::string::npos)
        << Log(workers[0]);
  }
  EXPECT_EQ(Log(workers[0]).find("worker 0: epoch 1: skipped 1"),
            std::string::npos)
      << Log(workers[0]);
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  std::printf("%s\n", summary.dump(2).c_str());
  EXPECT_EQ(summary["global_step"].get<int64_t>(), 3 * 32);
  // Global batch step * 2 + worker: each applied once, worker 1's after
  // the kill by worker 0.
  std::istringstream in(ReadFile(ledger));
  std::map<int64_t, int> counts;
  int64_t batch = 0;
  int count = 0;
  while (in >> batch >> count) counts[batch] = count;
  for (int64_t b = 0; b < 2 * 96; ++b) {
    EXPECT_EQ(counts[b], 1) << "global batch " << b;
  }
  EXPECT_EQ(counts.size(), 2u * 96);
  ASSERT_TRUE(summary["test_auc"].is_number()) << summary.dump(2);
  EXPECT_GE(summary["test_auc"].get<double>(), 0.95);
}

TEST(Criteo, TheChiefRefusesWhatStreamedCriteoDataCannotDo) {
  const std::string data_dir = TempPath("fixed-data");
  mkdir(data_dir.c_str(), 0755);
  ASSERT_TRUE(WriteFile(data_dir + "/train.tsv", Lines(100, 1)));
  ASSERT_TRUE(WriteFile(data_dir + "/test.tsv", Lines(10, 2)));
  const std::string model = TempPath("fixed-model.json");
  ASSERT_TRUE(WriteFile(model, ModelJson()));
  LocalCluster cluster(1, 1);
  Subprocess chief = cluster.Start(
      "fixed", "chief", 0,
      {"--model=" + model, "--data_dir=" + data_dir, "--data_format=criteo"});
  EXPECT_EQ(chief.Wait(), 2);
  EXPECT_NE(Log(chief).find("--dynamic_embeddings"), std::string::npos)
      << Log(chief);
  // A format the chief does not know.
  Subprocess format = cluster.Start(
      "format", "chief", 0,
      {"--model=" + model, "--data_dir=" + data_dir, "--data_format=parquet"});
  EXPECT_EQ(format.Wait(), 2);
  EXPECT_NE(Log(format).find("--data_format: \"parquet\" must be"),
            std::string::npos)
      << Log(format);
  // A file named by both splits' patterns.
  Subprocess both =
      cluster.Start("both", "chief", 0,
                    {"--model=" + model, "--data_dir=" + data_dir,
                     "--data_format=criteo", "--dynamic_embeddings=embedding",
                     "--train_files=t*.tsv", "--test_files=test.tsv"});
  EXPECT_EQ(both.Wait(), 2);
  EXPECT_NE(Log(both).find(absl::StrCat("--data_dir: ", data_dir,
                                        "/test.tsv is both a training file "
                                        "and a test file")),
            std::string::npos)
      << Log(both);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
