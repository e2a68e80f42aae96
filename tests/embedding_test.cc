// A model whose first layer is a Keras Embedding trains end to end: the ps
// holds the table as a sparse table, workers pull and push only the rows
// their batches touch (worker/sparse_tables.h), and the data is a CSV of id
// columns written here. Real processes on 127.0.0.1.
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr int kVocabulary = 50;
constexpr int kWidth = 8;
// The data uses ids below this only: the table's other rows are never
// touched, so never updated.
constexpr int kIdsUsed = 40;

// Embedding(vocabulary, 8) over 2 ids per example, Flatten, Dense(2,
// softmax).
std::string ModelJson(int vocabulary = kVocabulary) {
  return absl::StrCat(R"({"class_name": "Sequential", "config": {
    "name": "ids", "layers": [
      {"class_name": "Embedding", "config": {"name": "embedding",
        "batch_input_shape": [null, 2], "input_dim": )",
                      vocabulary, R"(, "output_dim": )", kWidth, R"(}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 2,
        "activation": "softmax"}}]}})");
}

// `n` lines "id0,id1,label" with label = id0 % 2: the model must learn each
// id's row, and the second id is noise.
std::string IdCsv(int n, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> id(0, kIdsUsed - 1);
  std::string csv;
  for (int i = 0; i < n; ++i) {
    const int id0 = id(random), id1 = id(random);
    absl::StrAppend(&csv, id0, ",", id1, ",", id0 % 2, "\n");
  }
  return csv;
}

// A data dir (train.csv, test.csv) and the model's JSON file.
struct Inputs {
  std::string data_dir;
  std::string model;
};

Inputs WriteInputs(const std::string& name, int vocabulary = kVocabulary) {
  Inputs inputs;
  inputs.data_dir = TempPath(name + "-data");
  mkdir(inputs.data_dir.c_str(), 0755);
  EXPECT_TRUE(WriteFile(inputs.data_dir + "/train.csv", IdCsv(2048, 1)));
  EXPECT_TRUE(WriteFile(inputs.data_dir + "/test.csv", IdCsv(500, 2)));
  inputs.model = TempPath(name + "-model.json");
  EXPECT_TRUE(WriteFile(inputs.model, ModelJson(vocabulary)));
  return inputs;
}

// Largest |value| in rows [begin, end) of the table.
float LargestInRows(const std::vector<float>& table, int begin, int end) {
  float largest = 0;
  for (int i = begin * kWidth; i < end * kWidth; ++i) {
    largest = std::max(largest, std::fabs(table[i]));
  }
  return largest;
}

TEST(Embedding, TrainsFromAnIdCsvWithTwoPsAndTwoWorkersSync) {
  const Inputs inputs = WriteInputs("sync");
  const std::string model_dir = TempPath("sync-run");
  LocalCluster(2, 2).Run(
      "sync",
      {"--model=" + inputs.model, "--data_dir=" + inputs.data_dir,
       "--mode=sync", "--optimizer=adam", "--learning_rate=0.02",
       "--batch_size=32", "--epochs=4", "--threads=1",
       "--model_dir=" + model_dir},
      {"--data_dir=" + inputs.data_dir, "--threads=1"});
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  std::printf("%s\n", summary.dump(2).c_str());
  // Chance is 0.5; the label is a function of the first id.
  EXPECT_GE(summary["test_accuracy"].get<double>(), 0.95);

  // The table the ps held, from the final checkpoint: the rows the data
  // touches were trained away from the initializer's [-0.05, 0.05]; the
  // others were never updated.
  const auto tensors =
      ReadSafetensors(ExportSafetensors(model_dir, "sync-export"));
  ASSERT_EQ(tensors.count("embedding/embeddings"), 1u);
  const std::vector<float>& table = tensors.at("embedding/embeddings");
  ASSERT_EQ(table.size(), size_t{kVocabulary} * kWidth);
  EXPECT_GT(LargestInRows(table, 0, kIdsUsed), 0.1f);
  EXPECT_LE(LargestInRows(table, kIdsUsed, kVocabulary), 0.05f);
}

// The chief evaluates on the whole table, which it pulls from the ps: a
// table of 70 MB, more than one gRPC message may carry (64 MB), comes in
// pieces.
TEST(Embedding, TheChiefEvaluatesWithATableLargerThanOneMessage) {
  constexpr int kLarge = 2200000;  // rows of 8 floats: 70.4 MB
  const Inputs inputs = WriteInputs("large", kLarge);
  const std::string model_dir = TempPath("large-run");
  LocalCluster(1, 1).Run(
      "large",
      {"--model=" + inputs.model, "--data_dir=" + inputs.data_dir,
       "--optimizer=sgd", "--learning_rate=0.5", "--steps=20",
       "--batch_size=32", "--threads=1", "--model_dir=" + model_dir},
      {"--data_dir=" + inputs.data_dir, "--threads=1"});
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  EXPECT_TRUE(summary["test_accuracy"].is_number()) << summary.dump(2);
  EXPECT_EQ(summary["global_step"].get<int64_t>(), 20) << summary.dump(2);
}

// Sync with the sparse table: 2 workers of batch 16 compute exactly what one
// worker of batch 32 does (the ps divides each row's summed gradient by the
// step's global batch, duplicates summed).
TEST(Embedding, TwoWorkersOfBatch16EqualOneWorkerOfBatch32) {
  const Inputs inputs = WriteInputs("equal");
  auto train = [&](int workers, int batch) {
    const std::string name = absl::StrCat("equal", workers);
    const std::string model_dir = TempPath(name + "-run");
    LocalCluster(1, workers)
        .Run(name,
             {"--model=" + inputs.model, "--data_dir=" + inputs.data_dir,
              "--optimizer=sgd", "--learning_rate=0.5", "--steps=20",
              absl::StrCat("--batch_size=", batch), "--threads=1",
              "--model_dir=" + model_dir},
             {"--data_dir=" + inputs.data_dir, "--threads=1"});
    return ReadSafetensors(ExportSafetensors(model_dir, name));
  };
  const auto two = train(2, 16);
  const auto one = train(1, 32);
  ASSERT_EQ(two.size(), 3u);  // embeddings, dense kernel and bias
  ASSERT_EQ(one.size(), two.size());
  for (const auto& [name, values] : two) {
    ASSERT_EQ(one.count(name), 1u) << name;
    const std::vector<float>& other = one.at(name);
    ASSERT_EQ(values.size(), other.size()) << name;
    double max_difference = 0, max_value = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      max_difference =
          std::max(max_difference, std::fabs(double{values[i]} - other[i]));
      max_value = std::max(max_value, std::fabs(double{values[i]}));
    }
    EXPECT_LE(max_difference, 1e-5) << name;
    if (name == "embedding/embeddings") {
      EXPECT_GT(max_value, 0.06) << name << " did not train";
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
