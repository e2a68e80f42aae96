// The evaluator task's evaluation of a checkpoint on Criteo files gives the
// figures the chief's own evaluation gives at the same step: the chief
// pulls the growing table's rows from the ps (a read-only pull of the
// ps's EmbeddingTable), the evaluator reads them from the checkpoint that
// holds the same table.
#include "chief/checkpoint_evaluation.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chief/criteo_evaluation.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/id_remap.h"
#include "compute/loss_config.h"
#include "data/criteo_hash.h"
#include "data/criteo_line.h"
#include "data/test_files.h"
#include "gtest/gtest.h"
#include "model/dynamic_embeddings.h"
#include "model/keras_model.h"
#include "proto/training.pb.h"
#include "ps/embedding_table.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace chief {
namespace {

// "sparse" [26] -> Embedding(0, 2) -> Flatten -> Dense(1, sigmoid).
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {
  "name": "m", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [null, 26],
     "dtype": "int32", "name": "sparse"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 0,
     "output_dim": 2}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 1,
     "activation": "sigmoid"}}]}})";

constexpr int kValues = 30;  // Distinct values of C1 and of C2.

// `n` lines: C1 and C2 each one of kValues values, the label C1's parity;
// the other fields empty.
std::string Lines(int n, uint32_t seed) {
  std::mt19937 random(seed);
  std::string text;
  for (int i = 0; i < n; ++i) {
    const int c1 = random() % kValues;
    std::vector<std::string> columns(data::kCriteoColumns);
    columns[0] = absl::StrCat(c1 % 2);
    columns[data::kCriteoDense + 1] = absl::StrCat(absl::Hex(0x100 + c1));
    columns[data::kCriteoDense + 2] =
        absl::StrCat(absl::Hex(0x200 + random() % kValues));
    absl::StrAppend(&text, absl::StrJoin(columns, "\t"), "\n");
  }
  return text;
}

class CriteoCheckpointEvaluationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = worker::ParseKerasModel(kModel, 3).value();
    options_.files = {data::TempPath("test.tsv")};
    data::WriteFile(options_.files[0], Lines(157, 2));
    options_.batch = 20;
    LossConfig loss;
    loss.set_kind(LossConfig::BINARY_CROSSENTROPY);
    const worker::BackendLoss b = worker::ToBackendLoss(loss);
    worker::CpuBackendOptions cpu;
    cpu.num_threads = 1;
    cpu.loss = b.kind;
    cpu.loss_input = b.input;
    backend_ = worker::CreateCpuBackend(
                   worker::WithLocalTables(spec_, options_.batch), cpu)
                   .value();
    for (const VariableDef& def : spec_.variables) {
      if (worker::IsGrowingTable(def)) table_def_ = def;
    }
    ASSERT_EQ(table_def_.name(), "emb/embeddings");
    optimizer_ = [] {
      OptimizerConfig config;
      config.mutable_sgd();
      config.set_learning_rate(1.0);
      return *ps::CreateOptimizer(config);
    }();
    table_ =
        ps::EmbeddingTable::CreateGrowing(table_def_, 0, 1, optimizer_.get())
            .value();
    // Rows of C1 values trained toward their label; C2's values and the
    // missing ids never touched (their initial rows are read).
    std::vector<int64_t> ids;
    std::vector<float> g;
    for (int v = 0; v < kValues - 5; ++v) {
      ids.push_back(worker::TableKey(data::CriteoSparseId(1, 0x100 + v)));
      g.push_back(v % 2 ? -0.7f : 0.7f);
      g.push_back(v % 2 ? -0.2f : 0.3f);
    }
    table_->ApplyAsync(ids, g.data(), 1);
    kernel_ = Tensor::Create(DT_FLOAT, {52, 1}).value();
    bias_ = Tensor::Create(DT_FLOAT, {1}).value();
    for (int i = 0; i < 52; ++i) kernel_.data<float>()[i] = 0.5f + 0.01f * i;
    bias_.data<float>()[0] = 0.1f;
  }

  // The checkpoint of step 4 holding the table and the dense weights.
  ReadCheckpoint Checkpoint() const {
    ReadCheckpoint checkpoint;
    checkpoint.index.set_step(4);
    for (const VariableDef& def : spec_.variables) {
      *checkpoint.index.mutable_config()->add_variables() = def;
    }
    std::vector<int64_t> ids;
    std::vector<std::vector<float>> arrays;
    table_->Snapshot(&ids, &arrays);
    const auto bytes = [](const void* p, size_t n) {
      return std::string(static_cast<const char*>(p), n);
    };
    checkpoint.variables.push_back(
        {"out/kernel", DT_FLOAT, {52, 1}, bytes(kernel_.raw_data(), 52 * 4)});
    checkpoint.variables.push_back(
        {"out/bias", DT_FLOAT, {1}, bytes(bias_.raw_data(), 4)});
    checkpoint.variables.push_back(
        {"emb/embeddings",
         DT_FLOAT,
         {static_cast<int64_t>(ids.size()), 2},
         bytes(arrays[0].data(), arrays[0].size() * 4)});
    checkpoint.variables.push_back({"emb/embeddings/ids",
                                    DT_INT64,
                                    {static_cast<int64_t>(ids.size())},
                                    bytes(ids.data(), ids.size() * 8)});
    return checkpoint;
  }

  // The chief's evaluation: the table's rows pulled read-only.
  Evaluation ChiefsEvaluation() {
    const worker::Weights weights = {{"out/kernel", &kernel_},
                                     {"out/bias", &bias_}};
    absl::StatusOr<Evaluation> eval = EvaluateOnCriteoFiles(
        backend_.get(), spec_, weights, 4, options_, true,
        [this](const std::string& table, absl::Span<const int64_t> ids,
               float* out) {
          EXPECT_EQ(table, "emb/embeddings");
          return table_
              ->Read(ids, 0, absl::Now() + absl::Seconds(10), out,
                     /*read_only=*/true)
              .status();
        });
    EXPECT_TRUE(eval.ok()) << eval.status();
    return eval.value_or(Evaluation());
  }

  worker::ModelSpec spec_;
  CriteoEvaluationOptions options_;
  std::unique_ptr<worker::Backend> backend_;
  VariableDef table_def_;
  std::unique_ptr<ps::Optimizer> optimizer_;
  std::unique_ptr<ps::EmbeddingTable> table_;
  Tensor kernel_;
  Tensor bias_;
};

TEST_F(CriteoCheckpointEvaluationTest, GivesTheChiefsFiguresForTheSameStep) {
  const Evaluation chief = ChiefsEvaluation();
  std::unique_ptr<CheckpointEvaluation> evaluation =
      NewCriteoCheckpointEvaluation(backend_.get(), spec_, options_, true);
  absl::StatusOr<Evaluation> eval = evaluation->Evaluate(Checkpoint());
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->examples, 157);
  EXPECT_EQ(chief.examples, 157);
  EXPECT_EQ(eval->loss, chief.loss);
  EXPECT_EQ(eval->accuracy, chief.accuracy);
  ASSERT_TRUE(eval->auc.has_value() && chief.auc.has_value());
  EXPECT_EQ(*eval->auc, *chief.auc);
  EXPECT_EQ(*eval->log_loss, *chief.log_loss);
  EXPECT_EQ(*eval->calibration, *chief.calibration);
  EXPECT_EQ(eval->mean_prediction, chief.mean_prediction);
  EXPECT_EQ(eval->positive_rate, chief.positive_rate);
  // The trained rows separate the labels.
  EXPECT_GT(*eval->auc, 0.8);
}

TEST_F(CriteoCheckpointEvaluationTest, EvaluatesTheCheckpointsRowsNotOthers) {
  const Evaluation trained = ChiefsEvaluation();
  // The same checkpoint without its stored rows: every id reads its
  // initial row, and the figures change.
  ReadCheckpoint untrained = Checkpoint();
  untrained.variables[2].shape[0] = 0;
  untrained.variables[2].data.clear();
  untrained.variables[3].shape[0] = 0;
  untrained.variables[3].data.clear();
  std::unique_ptr<CheckpointEvaluation> evaluation =
      NewCriteoCheckpointEvaluation(backend_.get(), spec_, options_, true);
  absl::StatusOr<Evaluation> eval = evaluation->Evaluate(untrained);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_NE(eval->loss, trained.loss);
  EXPECT_LT(*eval->auc, *trained.auc);
}

TEST_F(CriteoCheckpointEvaluationTest, ADamagedVariableIsNamed) {
  ReadCheckpoint damaged = Checkpoint();
  damaged.variables[0].data.pop_back();
  std::unique_ptr<CheckpointEvaluation> evaluation =
      NewCriteoCheckpointEvaluation(backend_.get(), spec_, options_, true);
  absl::StatusOr<Evaluation> eval = evaluation->Evaluate(damaged);
  EXPECT_TRUE(absl::IsDataLoss(eval.status())) << eval.status();
  EXPECT_NE(eval.status().message().find("'out/kernel'"), std::string::npos)
      << eval.status();
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
