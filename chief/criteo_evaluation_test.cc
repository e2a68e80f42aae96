#include "chief/criteo_evaluation.h"

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

namespace pstrain {
namespace chief {
namespace {

// "sparse" [26] -> Embedding(0, 1) -> Flatten -> Dense(1, sigmoid): with a
// kernel of ones and no bias, the logit is the sum of the 26 ids' rows.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {
  "name": "m", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [null, 26],
     "dtype": "int32", "name": "sparse"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 0,
     "output_dim": 1}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 1,
     "activation": "sigmoid"}}]}})";

// A line whose C1 is `c1` (hex) and whose label is `label`; the rest empty.
std::string Line(int label, const std::string& c1) {
  std::vector<std::string> columns(data::kCriteoColumns);
  columns[0] = absl::StrCat(label);
  columns[data::kCriteoDense + 1] = c1;
  return absl::StrJoin(columns, "\t") + "\n";
}

TEST(EvaluateOnCriteoFiles, PullsEachBatchsRowsByIdAndComputesCtrMetrics) {
  // Labels 1 for C1 = a, 0 for C1 = b: 3 + 2 lines, read in batches of 2.
  const std::string path = data::TempPath("test.tsv");
  data::WriteFile(path, Line(1, "a") + Line(0, "b") + Line(1, "a") +
                            Line(0, "b") + Line(1, "a"));
  const worker::ModelSpec spec = worker::ParseKerasModel(kModel, 1).value();
  CriteoEvaluationOptions options;
  options.files = {path};
  options.batch = 2;
  LossConfig loss;
  loss.set_kind(LossConfig::BINARY_CROSSENTROPY);
  const worker::BackendLoss b = worker::ToBackendLoss(loss);
  worker::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  cpu.loss = b.kind;
  cpu.loss_input = b.input;
  std::unique_ptr<worker::Backend> backend =
      worker::CreateCpuBackend(worker::WithLocalTables(spec, options.batch),
                               cpu)
          .value();
  Tensor kernel = Tensor::Create(DT_FLOAT, {26, 1}).value();
  Tensor bias = Tensor::Create(DT_FLOAT, {1}).value();
  for (int i = 0; i < 26; ++i) kernel.data<float>()[i] = 1.0f;
  bias.data<float>()[0] = 0.0f;
  const worker::Weights weights = {{"out/kernel", &kernel},
                                   {"out/bias", &bias}};
  // Rows: +1 for C1 = a, -1 for C1 = b, 0 for every other id.
  const int64_t a = worker::TableKey(data::CriteoSparseId(1, 0xa));
  const int64_t b_id = worker::TableKey(data::CriteoSparseId(1, 0xb));
  int calls = 0;
  size_t most_ids = 0;
  const PullRows pull = [&](const std::string& table,
                            absl::Span<const int64_t> ids, float* out) {
    EXPECT_EQ(table, "emb/embeddings");
    ++calls;
    most_ids = std::max(most_ids, ids.size());
    EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_GE(ids[i], 0);
      out[i] = ids[i] == a ? 1.0f : ids[i] == b_id ? -1.0f : 0.0f;
    }
    return absl::OkStatus();
  };
  absl::StatusOr<Evaluation> eval = EvaluateOnCriteoFiles(
      backend.get(), spec, weights, 1, options, /*binary_metrics=*/true, pull);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(calls, 3);  // Batches of 2, 2 and 1 lines.
  // A batch of 2 lines names at most 2 x 26 ids; the 25 empty fields'
  // missing ids are shared by both lines: 25 + 2 distinct.
  EXPECT_EQ(most_ids, 27u);
  const double p = 1.0 / (1.0 + std::exp(-1.0));  // sigmoid(1)
  EXPECT_DOUBLE_EQ(*eval->auc, 1.0);
  EXPECT_DOUBLE_EQ(eval->accuracy, 1.0);
  EXPECT_NEAR(*eval->log_loss, -std::log(p), 1e-6);
  EXPECT_NEAR(eval->loss, -std::log(p), 1e-6);
  EXPECT_NEAR(eval->mean_prediction, (3 * p + 2 * (1 - p)) / 5, 1e-6);
  EXPECT_DOUBLE_EQ(eval->positive_rate, 0.6);
  EXPECT_NEAR(*eval->calibration, (3 * p + 2 * (1 - p)) / 5 / 0.6, 1e-6);
}

TEST(EvaluateOnCriteoFiles, AMalformedLineIsNamedOrSkipped) {
  const std::string path = data::TempPath("bad.tsv");
  data::WriteFile(path, Line(1, "a") + "1\t2\n" + Line(0, "b"));
  const worker::ModelSpec spec = worker::ParseKerasModel(kModel, 1).value();
  CriteoEvaluationOptions options;
  options.files = {path};
  options.batch = 4;
  LossConfig loss;
  loss.set_kind(LossConfig::BINARY_CROSSENTROPY);
  worker::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  cpu.loss = worker::ToBackendLoss(loss).kind;
  cpu.loss_input = worker::ToBackendLoss(loss).input;
  std::unique_ptr<worker::Backend> backend =
      worker::CreateCpuBackend(worker::WithLocalTables(spec, options.batch),
                               cpu)
          .value();
  Tensor kernel = Tensor::Create(DT_FLOAT, {26, 1}).value();
  Tensor bias = Tensor::Create(DT_FLOAT, {1}).value();
  const worker::Weights weights = {{"out/kernel", &kernel},
                                   {"out/bias", &bias}};
  const PullRows zeros = [](const std::string&, absl::Span<const int64_t> ids,
                            float* out) {
    std::fill(out, out + ids.size(), 0.0f);
    return absl::OkStatus();
  };
  absl::StatusOr<Evaluation> refused = EvaluateOnCriteoFiles(
      backend.get(), spec, weights, 1, options, false, zeros);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_NE(refused.status().message().find("bad.tsv"), std::string::npos)
      << refused.status();
  options.bad_lines = data::BadLines::kSkip;
  absl::StatusOr<Evaluation> skipped = EvaluateOnCriteoFiles(
      backend.get(), spec, weights, 1, options, false, zeros);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  // Two lines evaluated, each at p = 0.5 with zero weights.
  EXPECT_NEAR(skipped->loss, std::log(2.0), 1e-6);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
