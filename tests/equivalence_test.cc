// N workers compute what one process with the global batch would: sync
// training (no dropout) with 2 workers x batch 32 ends with the same
// variables after 20 steps as 1 worker x batch 64, compared through the
// chief's safetensors export: for the cnn, and for a Functional model with
// self-attention, LayerNormalization and a shared layer
// (testdata/functional_equivalence.json). Workers compute on one thread: the
// subject is how the batch is split, not how many threads sum it. Real
// processes on 127.0.0.1.
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

constexpr char kFunctional[] = "tests/testdata/functional_equivalence.json";

// Trains `model` with `workers` workers of `batch` examples for 20 steps
// and exports the variables; returns the export's path.
std::string Train(const std::string& model, int workers, int batch) {
  const std::string name =
      absl::StrCat(model == kFunctional ? "functional" : model, "-", workers,
                   "x", batch);
  const std::string model_dir = TempPath(name);
  LocalCluster(1, workers)
      .Run(name,
           {"--model=" + model, "--optimizer=sgd", "--learning_rate=0.1",
            "--steps=20", absl::StrCat("--batch_size=", batch),
            "--model_dir=" + model_dir},
           {"--threads=1"});
  return ExportSafetensors(model_dir, name);
}

// Expects the runs within `tolerance` of each other, variable by variable.
void ExpectEquivalent(const std::string& model, size_t variables,
                      double tolerance) {
  const auto two = ReadSafetensors(Train(model, 2, 32));
  const auto one = ReadSafetensors(Train(model, 1, 64));
  ASSERT_EQ(two.size(), variables);
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
    EXPECT_LE(max_difference, tolerance) << name;
  }
  // The comparison can tell runs apart: half the global batch trains to
  // visibly different values.
  EXPECT_GT(LargestDifference(one, ReadSafetensors(Train(model, 1, 32))),
            1e-3);
}

TEST(Equivalence, TwoWorkersOfBatch32EqualOneWorkerOfBatch64) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  // The cnn's kernels and biases. oneDNN's convolutions sum a batch of 32
  // and one of 64 in another order on some CPUs: on AVX2 (no AVX-512) the
  // runs end up to 5.5e-5 apart (conv2d/bias), under 1e-5 with AVX-512.
  ExpectEquivalent("cnn", 8, 1e-4);
}

TEST(Equivalence, AFunctionalModelWithAttentionAndASharedLayer) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  // tokens (2), attention (8), norm (2), ff (2, once), logits (2).
  ExpectEquivalent(kFunctional, 16, 1e-5);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
