// A short run's TensorBoard event files, read back by an independent reader
// (tests/tensorboard_reader.py: its own CRC32C and TensorFlow's field
// numbers, through Debian's python3-protobuf), hold the values of
// summary.json and history.csv. Real processes on 127.0.0.1.
#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr int kEpochs = 3;
constexpr int kPrintEvery = 5;

// Input [4] -> Dense(8, relu) -> Dense(2, softmax).
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {
  "name": "small", "layers": [
    {"class_name": "InputLayer", "config": {"name": "x",
      "batch_input_shape": [null, 4]}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 8,
      "activation": "relu"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 2,
      "activation": "softmax"}}]}})";

// `n` rows of 4 features in [-1, 1) and the label x0 + x1 > 0.
std::string Rows(int n, uint64_t seed) {
  std::string csv;
  for (int i = 0; i < n; ++i) {
    float x[4];
    for (float& v : x) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<float>((seed >> 40) % 2000) / 1000.0f - 1.0f;
    }
    absl::StrAppend(&csv, x[0], ",", x[1], ",", x[2], ",", x[3], ",",
                    x[0] + x[1] > 0 ? 1 : 0, "\n");
  }
  return csv;
}

// The reader's (step, value) points of `tag` in `run`.
std::vector<std::pair<int64_t, float>> Points(const nlohmann::json& events,
                                              const std::string& run,
                                              const std::string& tag) {
  std::vector<std::pair<int64_t, float>> points;
  const nlohmann::json& series = events[run]["scalars"][tag];
  if (!series.is_array()) return points;
  for (const nlohmann::json& point : series) {
    // The reader's values are float32s, written exactly.
    points.emplace_back(point[0].get<int64_t>(),
                        static_cast<float>(point[1].get<double>()));
  }
  return points;
}

// What the event files should hold for a history column: its values as
// float32, at steps 0, 1, ... (epochs).
std::vector<std::pair<int64_t, float>> Expected(const nlohmann::json& column) {
  std::vector<std::pair<int64_t, float>> points;
  for (size_t i = 0; i < column.size(); ++i) {
    points.emplace_back(i, static_cast<float>(column[i].get<double>()));
  }
  return points;
}

// The small model's data in `name`-data, its JSON in `name`-model.json;
// returns the chief's flags for a kEpochs run into `model_dir`.
std::vector<std::string> SmallRun(const std::string& name,
                                  const std::string& model_dir,
                                  std::string* data_dir) {
  *data_dir = TempPath(name + "-data");
  mkdir(data_dir->c_str(), 0755);
  EXPECT_TRUE(WriteFile(*data_dir + "/train.csv", Rows(512, 1)));
  EXPECT_TRUE(WriteFile(*data_dir + "/test.csv", Rows(128, 2)));
  const std::string model = TempPath(name + "-model.json");
  EXPECT_TRUE(WriteFile(model, kModel));
  return {"--model=" + model,
          "--data_dir=" + *data_dir,
          "--mode=sync",
          "--batch_size=16",
          absl::StrCat("--epochs=", kEpochs),
          "--optimizer=sgd",
          "--learning_rate=0.05",
          absl::StrCat("--print_every_steps=", kPrintEvery),
          "--model_dir=" + model_dir};
}

// The reader's JSON of `model_dir`'s event files (null if it failed).
nlohmann::json ReadEventFiles(const std::string& model_dir,
                              const std::string& name) {
  const std::string out = TempPath(name + "-events.json");
  Subprocess reader =
      Subprocess::Start("tests/tensorboard_reader.py", {model_dir, out}, {},
                        TempPath(name + "-reader.log"));
  EXPECT_EQ(reader.Wait(120), 0) << Log(reader);
  return nlohmann::json::parse(ReadFile(out), nullptr, false);
}

TEST(TensorBoard, EventFilesHoldTheRunsLossAndAccuracy) {
  const std::string model_dir = TempPath("tb-run");
  std::string data_dir;
  const std::vector<std::string> flags = SmallRun("tb", model_dir, &data_dir);
  // Pushes slowed down (20 ms a step) so that the chief wakes at each
  // epoch's end before the workers pass the next: unslowed, the 48 steps
  // take a few milliseconds, and on a busy machine the chief could first
  // look at step 48 and print two epochs' lines there, one without reports.
  const std::string chief_log = LocalCluster(1, 2).Run(
      "tb", flags, {"--data_dir=" + data_dir, "--push_delay_ms=20"});

  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  const nlohmann::json& history = summary["history"];
  ASSERT_TRUE(history.is_object()) << summary.dump(2);
  EXPECT_EQ(history["epoch"], nlohmann::json::array({0, 1, 2}));
  for (const char* column : {"loss", "accuracy", "val_loss", "val_accuracy",
                             "examples_per_sec", "seconds"}) {
    ASSERT_TRUE(history[column].is_array()) << column << summary.dump(2);
    ASSERT_EQ(history[column].size(), static_cast<size_t>(kEpochs)) << column;
    for (const nlohmann::json& v : history[column]) {
      ASSERT_TRUE(v.is_number()) << column << summary.dump(2);
      EXPECT_GT(v.get<double>(), 0) << column << "\n" << chief_log;
    }
  }
  // The last epoch's evaluation is the final one.
  EXPECT_NEAR(history["val_loss"][kEpochs - 1].get<double>(),
              summary["test_loss"].get<double>(), 5e-7);
  EXPECT_NEAR(history["val_accuracy"][kEpochs - 1].get<double>(),
              summary["test_accuracy"].get<double>(), 5e-7);

  // history.csv: CSVLogger's columns, the same values exactly.
  const std::vector<std::string> lines = absl::StrSplit(
      ReadFile(model_dir + "/history.csv"), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(1 + kEpochs))
      << ReadFile(model_dir + "/history.csv");
  EXPECT_EQ(lines[0],
            "epoch,accuracy,examples_per_sec,loss,seconds,val_accuracy,"
            "val_loss");
  const std::vector<std::string> columns = absl::StrSplit(lines[0], ',');
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    const std::vector<std::string> cells =
        absl::StrSplit(lines[1 + epoch], ',');
    ASSERT_EQ(cells.size(), columns.size()) << lines[1 + epoch];
    EXPECT_EQ(cells[0], absl::StrCat(epoch));
    for (size_t c = 1; c < cells.size(); ++c) {
      double value = 0;
      ASSERT_TRUE(absl::SimpleAtod(cells[c], &value)) << cells[c];
      EXPECT_EQ(value, history[columns[c]][epoch].get<double>())
          << columns[c] << " of epoch " << epoch;
    }
  }

  // The event files, read by the independent reader.
  const nlohmann::json events = ReadEventFiles(model_dir, "tb");
  ASSERT_TRUE(events.is_object());
  ASSERT_EQ(events["train"]["files"].size(), 1u) << events.dump();
  ASSERT_EQ(events["validation"]["files"].size(), 1u) << events.dump();

  EXPECT_EQ(Points(events, "train", "epoch_loss"), Expected(history["loss"]));
  EXPECT_EQ(Points(events, "train", "epoch_accuracy"),
            Expected(history["accuracy"]));
  EXPECT_EQ(Points(events, "train", "epoch_examples_per_second"),
            Expected(history["examples_per_sec"]));
  EXPECT_EQ(Points(events, "validation", "epoch_loss"),
            Expected(history["val_loss"]));
  EXPECT_EQ(Points(events, "validation", "epoch_accuracy"),
            Expected(history["val_accuracy"]));
  for (const auto& [epoch, rate] :
       Points(events, "train", "epoch_learning_rate")) {
    EXPECT_EQ(rate, 0.05f) << "epoch " << epoch;
  }
  EXPECT_EQ(Points(events, "train", "epoch_learning_rate").size(),
            static_cast<size_t>(kEpochs));

  // A batch point at every progress line the chief printed (one with
  // training reports since the previous line), with its figures.
  std::map<int64_t, std::pair<double, double>> printed;
  const std::regex line_re(R"(step (\d+)/\d+  loss ([0-9.]+)  acc ([0-9.]+))");
  for (std::sregex_iterator it(chief_log.begin(), chief_log.end(), line_re),
       end;
       it != end; ++it) {
    const double loss = std::stod((*it)[2]);
    const double acc = std::stod((*it)[3]);
    if (loss == 0 && acc == 0) continue;  // no report in that interval
    printed[std::stoll((*it)[1])] = {loss, acc};
  }
  const auto batch_loss = Points(events, "train", "batch_loss");
  const auto batch_accuracy = Points(events, "train", "batch_accuracy");
  ASSERT_EQ(batch_loss.size(), printed.size()) << chief_log;
  ASSERT_EQ(batch_accuracy.size(), printed.size());
  ASSERT_GE(printed.size(), static_cast<size_t>(kEpochs)) << chief_log;
  const int64_t total = summary["global_step"].get<int64_t>();
  for (size_t i = 0; i < batch_loss.size(); ++i) {
    const int64_t step = batch_loss[i].first;
    ASSERT_EQ(printed.count(step), 1u) << "no line at step " << step;
    EXPECT_NEAR(batch_loss[i].second, printed[step].first, 5.1e-5) << step;
    EXPECT_EQ(batch_accuracy[i].first, step);
    EXPECT_NEAR(batch_accuracy[i].second, printed[step].second, 5.1e-5) << step;
    EXPECT_GT(step, 0);
    EXPECT_LE(step, total);
  }
  // Evaluation against the global step, each epoch's at its end.
  const auto by_step =
      Points(events, "validation", "evaluation_loss_vs_iterations");
  ASSERT_EQ(by_step.size(), static_cast<size_t>(kEpochs));
  EXPECT_EQ(by_step.back(),
            std::make_pair(
                total, static_cast<float>(
                           history["val_loss"][kEpochs - 1].get<double>())));

  // The model, as text.
  const nlohmann::json& text = events["train"]["text"]["model_summary"];
  ASSERT_TRUE(text.is_array() && text.size() == 1) << events.dump();
  const std::string markdown = text[0][1].get<std::string>();
  EXPECT_NE(markdown.find("| hidden (Dense) | (None, 8) | 40 |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("Total params: 58"), std::string::npos) << markdown;
}

// With an evaluator task, the evaluation of each epoch's end comes from it,
// after the epoch's row: validation/ and history.csv get it then.
TEST(TensorBoard, EvaluatorTasksEvaluationsGoToValidation) {
  const std::string model_dir = TempPath("tbe-run");
  std::string data_dir;
  const std::vector<std::string> flags = SmallRun("tbe", model_dir, &data_dir);
  LocalCluster cluster(1, 1);
  cluster.AddEvaluator();
  Subprocess evaluator = cluster.Start(
      "tbe", "evaluator", 0,
      {"--model_dir=" + model_dir, "--data_dir=" + data_dir, "--threads=1"});
  cluster.Run("tbe", flags, {"--data_dir=" + data_dir, "--threads=1"});
  EXPECT_EQ(evaluator.Wait(60), 0) << Log(evaluator);

  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadFile(model_dir + "/summary.json");
  const nlohmann::json& history = summary["history"];
  ASSERT_TRUE(history["val_loss"].is_array()) << summary.dump(2);
  ASSERT_EQ(history["val_loss"].size(), static_cast<size_t>(kEpochs))
      << summary.dump(2);
  // The evaluator's own line for each epoch's checkpoint ("ckpt-16 (step
  // 16): test_loss 0.6931 ...") has the history's value.
  const std::string evaluator_log = Log(evaluator);
  const int64_t per_epoch = summary["global_step"].get<int64_t>() / kEpochs;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    const int64_t step = (epoch + 1) * per_epoch;
    const std::string key =
        absl::StrCat("ckpt-", step, " (step ", step, "): test_loss ");
    const size_t at = evaluator_log.find(key);
    ASSERT_NE(at, std::string::npos) << key << "\n" << evaluator_log;
    EXPECT_NEAR(std::stod(evaluator_log.substr(at + key.size())),
                history["val_loss"][epoch].get<double>(), 5.1e-5)
        << "epoch " << epoch;
  }
  EXPECT_NEAR(history["val_loss"][kEpochs - 1].get<double>(),
              summary["test_loss"].get<double>(), 5e-7);

  const nlohmann::json events = ReadEventFiles(model_dir, "tbe");
  ASSERT_TRUE(events.is_object());
  EXPECT_EQ(Points(events, "validation", "epoch_loss"),
            Expected(history["val_loss"]));
  EXPECT_EQ(Points(events, "validation", "epoch_accuracy"),
            Expected(history["val_accuracy"]));
  EXPECT_EQ(Points(events, "train", "epoch_loss"), Expected(history["loss"]));
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
