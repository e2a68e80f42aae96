#include "data/criteo_batch_source.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/criteo_hash.h"
#include "data/criteo_line.h"
#include "data/test_files.h"
#include "gtest/gtest.h"
#include "model/dynamic_embeddings.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {
namespace {

// Input "sparse" [26] -> Embedding(input_dim, 2) -> Flatten -> Dense(1).
std::string SparseModel(int input_dim, const std::string& input = "sparse") {
  return absl::StrCat(R"({"class_name": "Sequential", "config": {"name": "m",
    "layers": [
      {"class_name": "InputLayer", "config": {"batch_shape": [null, 26],
       "dtype": "int32", "name": ")",
                      input, R"("}},
      {"class_name": "Embedding", "config": {"name": "emb", "input_dim": )",
                      input_dim, R"(, "output_dim": 2}},
      {"class_name": "Flatten", "config": {"name": "flat"}},
      {"class_name": "Dense", "config": {"name": "out", "units": 1,
       "activation": "sigmoid"}}]}})");
}

// Line g: label g mod 2, C1 = g in hex, the rest empty.
std::string Lines(int64_t first, int64_t count) {
  std::string text;
  for (int64_t g = first; g < first + count; ++g) {
    std::vector<std::string> columns(data::kCriteoColumns);
    columns[0] = g % 2 == 0 ? "0" : "1";
    columns[data::kCriteoDense + 1] = absl::StrCat(absl::Hex(g));
    absl::StrAppend(&text, absl::StrJoin(columns, "\t"), "\n");
  }
  return text;
}

class CriteoBatchSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 10 lines in two files: 2 workers x batch 2 = 2 steps per epoch.
    files_ = {data::TempPath("train-0.tsv"), data::TempPath("train-1.tsv")};
    data::WriteFile(files_[0], Lines(0, 6));
    data::WriteFile(files_[1], data::Gzip(Lines(6, 4)));
    spec_ = ParseKerasModel(SparseModel(0), 1).value();
    inputs_ = CheckCriteoModel(spec_).value();
  }

  CriteoSourceOptions Options(int worker, int64_t first_step) {
    CriteoSourceOptions options;
    options.files = files_;
    options.num_workers = 2;
    options.worker_index = worker;
    options.batch_size = 2;
    options.steps_per_epoch = 2;
    options.first_step = first_step;
    options.total_steps = 5;
    options.inputs = inputs_;
    options.row_elements = 26;
    options.dtype = DT_INT32;
    return options;
  }

  // The lines of the next batch, after checking its ids and labels.
  std::vector<int64_t> NextLines(CriteoBatchSource& source) {
    absl::StatusOr<data::Batch*> batch = source.Next();
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) return {};
    std::vector<int64_t> lines = (*batch)->indices;
    for (int64_t r = 0; r < (*batch)->size(); ++r) {
      const int64_t g = lines[r];
      const int64_t* ids = (*batch)->wide_ids.data<int64_t>() + r * 26;
      EXPECT_EQ(static_cast<uint64_t>(ids[0]), data::CriteoSparseId(1, g));
      EXPECT_EQ(static_cast<uint64_t>(ids[1]), data::CriteoMissingId(2));
      EXPECT_EQ((*batch)->labels.data<int32_t>()[r], g % 2);
      EXPECT_EQ((*batch)->features.data<int32_t>()[r * 26], 0);
    }
    source.Release(*batch);
    return lines;
  }

  std::vector<std::string> files_;
  ModelSpec spec_;
  std::vector<CriteoInput> inputs_;
};

TEST_F(CriteoBatchSourceTest, EachWorkerStreamsItsLinesEveryEpoch) {
  std::vector<int64_t> seen;
  for (int worker = 0; worker < 2; ++worker) {
    std::unique_ptr<CriteoBatchSource> source =
        CriteoBatchSource::Open(Options(worker, 0)).value();
    std::vector<std::vector<int64_t>> steps;
    for (int step = 0; step < 5; ++step) steps.push_back(NextLines(*source));
    // Epoch 0: its blocks of 2 of [0, 8) (8 and 9 fill no step); epoch 1
    // again.
    const int64_t first = 2 * worker;
    EXPECT_EQ(steps[0], (std::vector<int64_t>{first, first + 1}));
    EXPECT_EQ(steps[1], (std::vector<int64_t>{first + 4, first + 5}));
    EXPECT_EQ(steps[2], steps[0]);
    EXPECT_EQ(steps[3], steps[1]);
    EXPECT_EQ(steps[4], steps[0]);
    for (int step = 0; step < 2; ++step) {
      seen.insert(seen.end(), steps[step].begin(), steps[step].end());
    }
    EXPECT_TRUE(absl::IsOutOfRange(source->Next().status()));
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(CriteoBatchSourceTest, ResumesMidEpochWhereTheRunWas) {
  std::unique_ptr<CriteoBatchSource> source =
      CriteoBatchSource::Open(Options(1, 3)).value();
  EXPECT_EQ(NextLines(*source), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(NextLines(*source), (std::vector<int64_t>{2, 3}));
}

TEST(CheckCriteoModel, RefusesFixedTablesAndOtherInputs) {
  absl::Status fixed =
      CheckCriteoModel(ParseKerasModel(SparseModel(100), 1).value()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(fixed));
  EXPECT_NE(fixed.message().find("--dynamic_embeddings"), std::string::npos)
      << fixed;
  absl::Status named =
      CheckCriteoModel(ParseKerasModel(SparseModel(0, "ids"), 1).value())
          .status();
  EXPECT_TRUE(absl::IsInvalidArgument(named));
  EXPECT_NE(named.message().find("'ids'"), std::string::npos) << named;
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
