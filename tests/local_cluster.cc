#include "tests/local_cluster.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace testing {
namespace {

std::string NewAddress() {
  return absl::StrCat("\"127.0.0.1:", PickFreePort(), "\"");
}

// When this test binary started (its static initialization).
const absl::Time kBinaryStarted = absl::Now();

// How long Run waits for the chief: 600 s, but 30 s less than what is left
// of Bazel's timeout of the test (TEST_TIMEOUT), so that a run that hangs
// fails with every task's log instead of being killed without one.
double ChiefWaitSeconds() {
  double seconds = 600;
  double timeout = 0;
  const char* env = std::getenv("TEST_TIMEOUT");
  if (env != nullptr && absl::SimpleAtod(env, &timeout) && timeout > 0) {
    const double left =
        timeout - absl::ToDoubleSeconds(absl::Now() - kBinaryStarted);
    seconds = std::min(seconds, left - 30);
  }
  return std::max(seconds, 10.0);
}

}  // namespace

bool HaveFashionMnist() {
  struct stat st;
  return stat(absl::StrCat(kFashionMnistDir, "/train-images-idx3-ubyte.gz")
                  .c_str(),
              &st) == 0;
}

std::string Log(Subprocess& p) { return ReadFile(p.log_path()); }

LocalCluster::LocalCluster(int num_ps, int num_workers) : chief_(NewAddress()) {
  for (int i = 0; i < num_ps; ++i) ps_.push_back(NewAddress());
  for (int i = 0; i < num_workers; ++i) AddWorker();
}

void LocalCluster::AddWorker() { workers_.push_back(NewAddress()); }

void LocalCluster::AddEvaluator() { evaluator_ = NewAddress(); }

std::string LocalCluster::TfConfig(const std::string& type, int index) const {
  return absl::StrCat(
      "{\"cluster\": {\"chief\": [", chief_, "]",
      ps_.empty() ? ""
                  : absl::StrCat(", \"ps\": [", absl::StrJoin(ps_, ", "), "]"),
      ", \"worker\": [", absl::StrJoin(workers_, ", "), "]",
      evaluator_.empty() ? ""
                         : absl::StrCat(", \"evaluator\": [", evaluator_, "]"),
      "}, \"task\": {\"type\": \"", type, "\", \"index\": ", index, "}}");
}

Subprocess LocalCluster::Start(const std::string& name, const std::string& type,
                               int index,
                               const std::vector<std::string>& args) const {
  const std::string binary = type == "evaluator" ? "chief" : type;
  std::vector<std::string> flags = args;
  // The chief and the ps tasks (or, in a collective run, the workers) share
  // a model_dir: give them the same one unless the test names it.
  if ((type != "worker" || ps_.empty()) &&
      std::none_of(args.begin(), args.end(), [](const std::string& arg) {
        return absl::StartsWith(arg, "--model_dir=");
      })) {
    flags.push_back("--model_dir=" + TempPath(name + "-model"));
  }
  return Subprocess::Start(
      absl::StrCat(binary, "/", binary), flags,
      {{"TF_CONFIG", TfConfig(type, index)}},
      TempPath(absl::StrCat(name, "-", type, index, ".log")));
}

std::string LocalCluster::Run(
    const std::string& name, const std::vector<std::string>& chief_flags,
    const std::vector<std::string>& worker_flags) const {
  std::vector<std::string> ps_flags;
  for (const std::string& flag : chief_flags) {
    if (absl::StartsWith(flag, "--model_dir=")) ps_flags.push_back(flag);
  }
  std::vector<Subprocess> tasks;
  for (int i = 0; i < num_ps(); ++i) {
    tasks.push_back(Start(name, "ps", i, ps_flags));
  }
  for (int i = 0; i < num_workers(); ++i) {
    std::vector<std::string> flags = worker_flags;
    if (num_ps() == 0)
      flags.insert(flags.end(), ps_flags.begin(), ps_flags.end());
    tasks.push_back(Start(name, "worker", i, flags));
  }
  Subprocess chief = Start(name, "chief", 0, chief_flags);
  const int chief_exit = chief.Wait(ChiefWaitSeconds());
  EXPECT_EQ(chief_exit, 0) << Log(chief);
  // After a chief that did not end (-1: killed), the tasks get a few
  // seconds: their logs say where they were.
  for (Subprocess& task : tasks) {
    EXPECT_EQ(task.Wait(chief_exit == -1 ? 5 : 60), 0) << Log(task);
  }
  return Log(chief);
}

std::string ExportSafetensors(const std::string& model_dir,
                              const std::string& name) {
  const std::string path = TempPath(name + ".safetensors");
  Subprocess chief = Subprocess::Start(
      "chief/chief",
      {"--export_safetensors=" + path, "--model_dir=" + model_dir}, {},
      TempPath(name + "-export.log"));
  EXPECT_EQ(chief.Wait(60), 0) << Log(chief);
  return path;
}

std::map<std::string, std::vector<float>> ReadSafetensors(
    const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::map<std::string, std::vector<float>> tensors;
  if (bytes.size() < 8) return tensors;
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  const nlohmann::json header =
      nlohmann::json::parse(bytes.substr(8, header_size), nullptr, false);
  if (!header.is_object()) return tensors;
  const size_t data = 8 + header_size;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__" || info["dtype"] != "F32") continue;
    const size_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    std::vector<float>& values = tensors[name];
    values.resize((end - begin) / 4);
    std::memcpy(values.data(), bytes.data() + data + begin, end - begin);
  }
  return tensors;
}

double LargestDifference(const std::map<std::string, std::vector<float>>& a,
                         const std::map<std::string, std::vector<float>>& b) {
  double largest = 0;
  for (const auto& [name, values] : a) {
    auto other = b.find(name);
    if (other == b.end() || other->second.size() != values.size()) {
      ADD_FAILURE() << name << " is missing or differs in size";
      return INFINITY;
    }
    for (size_t i = 0; i < values.size(); ++i) {
      largest =
          std::max(largest, std::fabs(double{values[i]} - other->second[i]));
    }
  }
  return largest;
}

}  // namespace testing
}  // namespace pstrain
