// N workers compute what one process with the global batch would: sync
// training of the cnn (no dropout) with 2 workers x batch 32 ends with the
// same variables after 20 steps as 1 worker x batch 64, compared through
// the chief's safetensors export. Real processes on 127.0.0.1.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

// Trains the cnn with `workers` workers of `batch` examples for 20 steps
// and exports the variables; returns the export's path.
std::string Train(int workers, int batch) {
  const std::string name = absl::StrCat(workers, "x", batch);
  const std::string model_dir = TempPath(name);
  LocalCluster(1, workers)
      .Run(name, {"--model=cnn", "--optimizer=sgd", "--learning_rate=0.1",
                  "--steps=20", absl::StrCat("--batch_size=", batch),
                  "--model_dir=" + model_dir});
  return ExportSafetensors(model_dir, name);
}

TEST(Equivalence, TwoWorkersOfBatch32EqualOneWorkerOfBatch64) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const auto two = ReadSafetensors(Train(2, 32));
  const auto one = ReadSafetensors(Train(1, 64));
  ASSERT_EQ(two.size(), 8u);  // the cnn's kernels and biases
  ASSERT_EQ(one.size(), two.size());
  for (const auto& [name, values] : two) {
    ASSERT_EQ(one.count(name), 1u) << name;
    const std::vector<float>& other = one.at(name);
    ASSERT_EQ(values.size(), other.size()) << name;
    double max_difference = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      max_difference =
          std::max(max_difference, std::fabs(double{values[i]} - other[i]));
    }
    EXPECT_LE(max_difference, 1e-5) << name;
  }
  // The comparison can tell runs apart: half the global batch trains to
  // visibly different values.
  const auto half = ReadSafetensors(Train(1, 32));
  double largest = 0;
  for (const auto& [name, values] : one) {
    const std::vector<float>& other = half.at(name);
    for (size_t i = 0; i < values.size(); ++i) {
      largest = std::max(largest, std::fabs(double{values[i]} - other[i]));
    }
  }
  EXPECT_GT(largest, 1e-3);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
