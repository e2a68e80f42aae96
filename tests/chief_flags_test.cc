// The chief's run settings, checked before it waits for anyone: each bad
// value of each flag (table below) makes the chief exit 2 with one line that
// names the flag, before it opens any connection or writes anything. The
// cluster's ps and worker ports have nothing listening and
// --wait_for_tasks_seconds is a day: a chief that checked a setting only
// once connected would hang there until Wait's limit and fail the test.
// The same setup with good flags gets as far as listening and waiting, so
// each refusal is its flag's.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

std::string WriteTestFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteFile(path, text));
  return path;
}

// A Keras model on 2 features with a 2-class softmax output, built from
// `hidden_layer` (a Keras layer's JSON).
std::string ModelJson(const std::string& hidden_layer) {
  return absl::StrCat(
      R"({"class_name": "Sequential", "config": {"name": "m", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in",
        "batch_input_shape": [null, 2]}},)",
      hidden_layer, R"(,
      {"class_name": "Dense", "config": {"name": "out", "units": 2,
        "activation": "softmax"}}]}})");
}

// A data dir whose train.csv and test.csv hold `n` lines "x0,x1,label".
std::string WriteData(int n) {
  const std::string dir = TempPath("flags-data");
  mkdir(dir.c_str(), 0755);
  std::string csv;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&csv, i % 7 * 0.1, ",", i % 5 * -0.2, ",", i % 2, "\n");
  }
  WriteTestFile("flags-data/train.csv", csv);
  WriteTestFile("flags-data/test.csv", csv);
  return dir;
}

class ChiefFlags : public ::testing::Test {
 protected:
  ChiefFlags() : cluster_(1, 1) {}

  // Starts the chief with good settings, then `flags` (a flag given twice
  // takes its last value), logging to <name>-chief0.log.
  Subprocess StartChief(const std::vector<std::string>& flags,
                        const std::string& name = "flags") {
    std::vector<std::string> args = {
        "--model=" + model_,         "--data_dir=" + data_dir_,
        "--model_dir=" + model_dir_, "--wait_for_tasks_seconds=86400",
        "--failure_timeout=1h",      "--threads=1",
    };
    args.insert(args.end(), flags.begin(), flags.end());
    return cluster_.Start(name, "chief", 0, args);
  }

  const LocalCluster cluster_;
  const std::string model_ = WriteTestFile(
      "flags-model.json",
      ModelJson(R"({"class_name": "Dense", "config": {"name": "hidden",
        "units": 4, "activation": "relu"}})"));
  const std::string data_dir_ = WriteData(256);
  const std::string model_dir_ = TempPath("flags-model-dir");
};

TEST_F(ChiefFlags, EachBadValueExitsTwoWithOneLineNamingTheFlag) {
  const std::string lstm = WriteTestFile(
      "flags-lstm.json",
      ModelJson(R"({"class_name": "LSTM", "config": {"name": "lstm",
        "units": 4}})"));
  const std::string not_json = WriteTestFile("flags-not.json", "{\"class_");
  const std::string a_file = WriteTestFile("flags-a-file", "x");
  struct Case {
    std::vector<std::string> flags;
    std::string message;  // the whole line, or its start when !whole
    bool whole = true;
  };
  const Case cases[] = {
      {{"--learning_rate=-0.1"}, "--learning_rate: -0.1 must be > 0"},
      {{"--learning_rate=nan"}, "--learning_rate: nan must be finite"},
      {{"--optimizer=sgd", "--learning_rate=1e-60"},
       "--learning_rate: 1e-60 must be representable as a float"},
      {{"--optimizer=momentum", "--momentum=1"},
       "--momentum: 1 must be in [0, 1)"},
      {{"--beta_1=1.5"}, "--beta_1: 1.5 must be in [0, 1)"},
      {{"--beta_2=-0.1"}, "--beta_2: -0.1 must be in [0, 1)"},
      {{"--epsilon=-1"}, "--epsilon: -1 must be >= 0"},
      {{"--optimizer=adagrad", "--epsilon=inf"},
       "--epsilon: inf must be finite"},
      {{"--optimizer=adagrad", "--initial_accumulator_value=-1"},
       "--initial_accumulator_value: -1 must be >= 0"},
      {{"--weight_decay=-0.5"}, "--weight_decay: -0.5 must be >= 0"},
      // A setting of another optimizer than the run's is refused too.
      {{"--optimizer=sgd", "--beta_1=2"}, "--beta_1: 2 must be in [0, 1)"},
      {{"--embedding_optimizer=rmsprop"},
       "--embedding_optimizer: \"rmsprop\" is not sgd, momentum, adagrad, "
       "adam, ftrl, lazy_adam (or empty: --optimizer)"},
      {{"--embedding_optimizer=ftrl", "--ftrl_learning_rate_power=0.5"},
       "--ftrl_learning_rate_power: 0.5 must be <= 0"},
      {{"--ftrl_l1_regularization_strength=-1"},
       "--ftrl_l1_regularization_strength: -1 must be >= 0"},
      {{"--embedding_learning_rate=0.1"},
       "--embedding_learning_rate: applies with --embedding_optimizer only"},
      {{"--embedding_min_count=0"}, "--embedding_min_count: 0 must be >= 1"},
      {{"--embedding_max_rows=-5"}, "--embedding_max_rows: -5 must be >= 0"},
      {{"--optimizer=rmsprop"},
       "--optimizer: \"rmsprop\" is not sgd, momentum, adagrad or adam"},
      {{"--batch_size=0"}, "--batch_size: 0 must be >= 1"},
      {{"--epochs=0"}, "--epochs: 0 must be >= 1"},
      {{"--steps=-1"}, "--steps: -1 must be >= 0"},
      {{"--mode=semi"}, "--mode: \"semi\" is not sync or async"},
      {{"--allreduce_dtype=fp16"},
       "--allreduce_dtype: \"fp16\" must be float32 or bf16"},
      // This cluster has a ps job: the workers push to it, nothing to
      // all-reduce.
      {{"--allreduce_dtype=bf16"},
       "--allreduce_dtype: bf16 applies to collective runs only",
       false},
      {{"--precision=fp16"}, "--precision: \"fp16\" must be fp32 or bf16"},
      {{"--replicas_to_aggregate=-1"},
       "--replicas_to_aggregate: -1 must be >= 0"},
      {{"--replicas_to_aggregate=2"},
       "--replicas_to_aggregate: 2 must be in [0, 1] (TF_CONFIG's workers)"},
      {{"--mode=async", "--max_staleness=-2"},
       "--max_staleness: -2 must be >= -1"},
      {{"--max_staleness=4"}, "--max_staleness: applies to --mode=async only"},
      {{"--mode=async", "--replicas_to_aggregate=1"},
       "--replicas_to_aggregate: applies to --mode=sync only"},
      {{"--print_every_steps=0"}, "--print_every_steps: 0 must be >= 1"},
      {{"--wait_for_tasks_seconds=0"},
       "--wait_for_tasks_seconds: 0 must be >= 1"},
      {{"--step_timeout_seconds=0"},
       "--step_timeout_seconds: 0 must be in [1, 1000000]"},
      {{"--threads=-1"}, "--threads: -1 must be in [0, 1024]"},
      {{"--threads=5000"}, "--threads: 5000 must be in [0, 1024]"},
      {{"--port=70000"}, "--port: 70000 must be in [0, 65535]"},
      {{"--keep_checkpoints=0"}, "--keep_checkpoints: 0 must be >= 1"},
      {{"--checkpoint_every_steps=-1"},
       "--checkpoint_every_steps: -1 must be >= 0"},
      {{"--checkpoint_every_secs=-1"},
       "--checkpoint_every_secs: -1 must be >= 0"},
      {{"--on_worker_failure=panic"},
       "--on_worker_failure: \"panic\" is not wait or continue"},
      {{"--failure_timeout=0s"}, "--failure_timeout: 0 must be > 0 (e.g. 10s)"},
      {{"--model_dir="}, "--model_dir: must not be empty"},
      // Checkpoints could not be written there: said at start.
      {{"--model_dir=" + a_file + "/run"},
       "--model_dir: mkdir " + a_file + "/run: Not a directory"},
      {{"--model_dir=/proc/self"},
       "--model_dir: cannot create a file in /proc/self: ",
       false},
      {{"--loss=hinge"},
       "--loss: \"hinge\" is not sparse_categorical_crossentropy, "
       "categorical_crossentropy, binary_crossentropy, mse, mae or huber"},
      {{"--model=/nonexistent.json"},
       "--model: model \"/nonexistent.json\": ",
       false},
      {{"--model=" + not_json}, "--model: ", false},
      {{"--model=" + lstm},
       "--model: model: layer 1 'lstm' (LSTM): LSTM is not supported",
       false},
      {{"--data_dir=/nonexistent"}, "--data_dir: ", false},
      {{"--train_files=day_?.gz"},
       "--train_files, --test_files: apply to --data_format=criteo only"},
      {{"--data_format=criteo", "--test_files=day_23.gz,"},
       "--test_files: an empty pattern"},
      {{"--data_format=criteo", "--train_files=days/day_1"},
       "--train_files: 'days/day_1' has a '/': patterns name files in "
       "--data_dir itself"},
      // Values that are not of the flag's type, and unknown flags: Abseil's
      // line, and status 2 (common/command_line.h).
      {{"--batch_size=abc"},
       "ERROR: Illegal value 'abc' specified for flag 'batch_size'"},
      {{"--nesterov=maybe"},
       "ERROR: Illegal value 'maybe' specified for flag 'nesterov'"},
      {{"--learning_rate"},
       "ERROR: Missing the value for the flag 'learning_rate'"},
      {{"--beta_3=0.5"}, "ERROR: Unknown command line flag 'beta_3'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.flags.back()));
    Subprocess chief = StartChief(c.flags);
    EXPECT_EQ(chief.Wait(60), 2);
    const std::string log = Log(chief);
    if (c.whole) {
      EXPECT_EQ(log, c.message + "\n");
    } else {
      EXPECT_TRUE(absl::StartsWith(log, c.message)) << log;
      EXPECT_EQ(log.find('\n'), log.size() - 1) << "not one line: " << log;
    }
  }
  struct stat st;
  EXPECT_NE(stat(model_dir_.c_str(), &st), 0) << "nothing may be written";
}

// A chief whose CPU lacks AVX-512 BF16 (oneDNN capped at AVX2 by its
// DNNL_MAX_CPU_ISA, as on such a CPU) refuses --precision=bf16, naming the
// missing feature.
TEST_F(ChiefFlags, Bf16OnACpuWithoutAvx512Bf16IsRefused) {
  ASSERT_EQ(setenv("DNNL_MAX_CPU_ISA", "AVX2", 1), 0);
  Subprocess chief = StartChief({"--precision=bf16"});
  unsetenv("DNNL_MAX_CPU_ISA");
  EXPECT_EQ(chief.Wait(60), 2);
  EXPECT_EQ(Log(chief),
            "--precision=bf16 needs a CPU with AVX-512 BF16 (avx512_bf16) or "
            "AMX; this CPU lacks avx512_bf16 (oneDNN's ISA here: avx2); use "
            "--precision=fp32\n");
}

TEST_F(ChiefFlags, GoodValuesGetAsFarAsWaitingForTheTasks) {
  Subprocess chief =
      StartChief({"--optimizer=momentum", "--learning_rate=0.05",
                  "--replicas_to_aggregate=1", "--batch_size=32"});
  // Until the chief says it listens (a chief that refused its settings
  // never does: 120 s, then the test fails).
  for (int i = 0;
       i < 1200 && Log(chief).find("chief listening on") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string log = Log(chief);
  EXPECT_NE(log.find("chief listening on"), std::string::npos) << log;

  // A second run in the same --model_dir is refused while this one lives
  // (another port: the refusal is the directory's, not the address's).
  Subprocess second = StartChief({"--port=0"}, "second");
  EXPECT_EQ(second.Wait(60), 2);
  const std::string refusal = Log(second);
  EXPECT_TRUE(absl::StartsWith(
      refusal, absl::StrCat("--model_dir: ", model_dir_,
                            "/chief.lock is held by the chief with pid ",
                            chief.pid(), " on ")))
      << refusal;
  EXPECT_TRUE(absl::EndsWith(
      refusal, ": another run uses this directory (give this one its own)\n"))
      << refusal;
  EXPECT_EQ(chief.Terminate(), 128 + 15) << log;
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
